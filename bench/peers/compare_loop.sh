#!/usr/bin/env bash
# Troupe's while loop against TensorFlow's, in one run, one after the other (issue 18): the cost
# of an iteration of a trivial body, an independent one and one that carries a matrix to the next
# iteration (dependent), parallel_iterations 1 and 10.
# Usage: bench/peers/compare_loop.sh [iterations] [steps]
# Needs build/bench/troupe-bench (tools/test.sh builds it) and the TF peer
# (bench/peers/setup_tf.sh installs it into bench/peers/.venv-tf).
set -euo pipefail
cd "$(dirname "$0")/../.."
iterations=${1:-100000}
steps=${2:-5}
bash bench/peers/setup_tf.sh >/dev/null
python=bench/peers/.venv-tf/bin/python
out=$(mktemp)
for body in trivial independent dependent; do
  for parallel in 1 10; do
    build/bench/troupe-bench loop --body "$body" --parallel "$parallel" --iterations "$iterations" --steps "$steps" \
      --threads 2 --json | tee -a "$out"
    if ! "$python" bench/peers/loop_tf.py --body "$body" --parallel "$parallel" --iterations "$iterations" \
        --steps "$steps" --threads 2 --json 2>"$out.err" | tee -a "$out"; then
      cat "$out.err" >&2
      exit 1
    fi
  done
done
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print()
print(f"{'body':12} {'parallel':>8} {'system':18} {'us/iteration':>13} {'ms/step':>9}")
for r in rows:
    print(f"{r['body']:12} {r['parallel']:>8} {r['system']:18} {r['us_per_iteration']:>13.3f} {r['median_ms']:>9.1f}")
PY
rm -f "$out" "$out.err"
