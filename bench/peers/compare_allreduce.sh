#!/usr/bin/env bash
# Ring all-reduce in Troupe (troupe-bench allreduce) and PyTorch's gloo (allreduce_torch.py) on
# the same points: 2, 3 and 4 processes on 127.0.0.1, float32 tensors of 1, 16 and 64 MiB, the
# median of STEPS timed all-reduces; the two sides take turns, twice each, then one table of bus
# bandwidth (2(N-1)/N x bytes / time) per point, the better of each side's two rounds.
# Usage: bench/peers/compare_allreduce.sh [STEPS]   (default 10)
# Needs build/bench/troupe-bench (tools/test.sh builds it) and Debian's python3-torch
# (bench/peers/setup_torch.sh installs it).
set -euo pipefail
cd "$(dirname "$0")/../.."
steps=${1:-10}
bash bench/peers/setup_torch.sh >/dev/null 2>&1
common=(--procs 2,3,4 --mib 1,16,64 --steps "$steps" --warmup 2 --json)
source bench/peers/tagged_runs.sh
trap 'rm -f "$out"' EXIT
for round in 1 2; do
  run troupe build/bench/troupe-bench allreduce "${common[@]}"
  run troupe-float16 build/bench/troupe-bench allreduce "${common[@]}" --float16
  run pytorch-gloo /usr/bin/python3 bench/peers/allreduce_torch.py "${common[@]}"
done
python3 - "$out" <<'PY'
import json, sys
best = {}
for line in open(sys.argv[1]):
    r = json.loads(line)
    key = (r["procs"], r["mib"], r["config"])
    best[key] = max(best.get(key, 0), r["busbw_gbps"])
print()
print(f"{'procs':>5} {'MiB':>5} {'troupe GB/s':>12} {'gloo GB/s':>10} {'troupe/gloo':>11} {'troupe float16 GB/s':>20}")
for procs, mib in sorted({(p, m) for p, m, _ in best}):
    t, g, h = best.get((procs, mib, "troupe"), 0), best.get((procs, mib, "pytorch-gloo"), 0), best.get((procs, mib, "troupe-float16"), 0)
    print(f"{procs:>5} {mib:>5g} {t:>12.3f} {g:>10.3f} {t / g if g else 0:>11.2f} {h:>20.3f}")
PY
