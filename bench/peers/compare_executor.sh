#!/usr/bin/env bash
# Troupe's executor against TensorFlow's on the same graphs, in one run, one after the other.
# Usage: bench/peers/compare_executor.sh [nodes] [steps] [threads]
# threads: both systems' inter-op threads (default: 2; TensorFlow's intra-op threads are 1).
# Needs build/bench/troupe-bench (tools/test.sh builds it) and the TF peer
# (bench/peers/setup_tf.sh installs it into bench/peers/.venv-tf).
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=${1:-10000}
steps=${2:-20}
threads=${3:-2}
bash bench/peers/setup_tf.sh >/dev/null
python=bench/peers/.venv-tf/bin/python
out=$(mktemp)
for shape in chain fanout random; do
  build/bench/troupe-bench executor --shape "$shape" --nodes "$nodes" --steps "$steps" --threads "$threads" --json | tee -a "$out"
  # TensorFlow logs its start-up to stderr; keep it out of the table, show it on failure.
  if ! "$python" bench/peers/executor_tf.py --shape "$shape" --nodes "$nodes" --steps "$steps" --threads "$threads" --json \
      2>"$out.err" | tee -a "$out"; then
    cat "$out.err" >&2
    exit 1
  fi
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print()
print(f"{'shape':8} {'system':18} {'threads':>7} {'us/node':>9} {'M nodes/s':>10} {'ms/step':>9} {'setup ms':>9}")
for r in rows:
    print(f"{r['shape']:8} {r['system']:18} {r['threads']:>7} {r['us_per_node']:>9.3f} "
          f"{r['nodes_per_s']/1e6:>10.2f} {r['median_step_ms']:>9.3f} {r.get('setup_ms', 0):>9.1f}")
PY
rm -f "$out" "$out.err"
