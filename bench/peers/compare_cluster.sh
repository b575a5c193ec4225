#!/usr/bin/env bash
# The same two-process graph in Troupe and in TensorFlow's gRPC runtime: a chain of 8 matmuls of
# 512x512 float32 split over two tasks on loopback, layer i on task i % 2, so a 1 MiB tensor
# crosses between the processes at every layer; one thread per process. Measures the step time
# (median and mean over STEPS steps after 20 warm-up steps), Troupe's side and TensorFlow's side
# taking turns, twice each, then one table.
# Usage: bench/peers/compare_cluster.sh [STEPS]   (default 200)
# Needs build/bench/troupe-bench with its `cluster` benchmark (tools/test.sh builds it) and the
# TF peer (bench/peers/setup_tf.sh installs it into bench/peers/.venv-tf). Without Troupe's side
# it says so and runs TensorFlow's side alone.
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-200}
bash bench/peers/setup_tf.sh >/dev/null 2>&1
python=bench/peers/.venv-tf/bin/python
common=(--size 512 --layers 8 --steps "$steps" --warmup 20 --threads 1 --json)

troupe=build/bench/troupe-bench
if [[ ! -x $troupe ]]; then
  echo "no $troupe: run tools/test.sh to build it; running TensorFlow's side alone" >&2
  troupe=
elif ! grep -qE '^[[:space:]]+cluster[[:space:]]' <<<"$("$troupe" 2>&1 || true)"; then
  # The usage text (no arguments) lists every benchmark, one a line; probing with `cluster` would run it.
  echo "$troupe has no cluster benchmark yet; running TensorFlow's side alone" >&2
  troupe=
fi

source bench/peers/tagged_runs.sh
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
for round in 1 2; do
  if [[ -n $troupe ]]; then
    run "troupe" "$troupe" cluster "${common[@]}"
  fi
  # TensorFlow logs its start-up to stderr; keep it out of the table, show it on failure.
  if ! run "tensorflow-grpc" "$python" bench/peers/cluster_chain_tf.py "${common[@]}" 2>"$err"; then
    cat "$err" >&2
    exit 1
  fi
done

python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print()
print(f"{'system':16} {'step_ms_median':>14} {'step_ms_mean':>12} {'crossings':>9} {'bytes each':>10} {'steps':>5}")
for r in rows:
    print(f"{r['system']:16} {r['step_ms_median']:>14.3f} {r['step_ms_mean']:>12.3f} "
          f"{r['crossings_per_step']:>9} {r['bytes_per_crossing']:>10} {r['steps']:>5}")
PY
