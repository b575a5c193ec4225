#!/usr/bin/env bash
# troupe-bench loop --pair: beside the --parallel loops, two loops of parallel_iterations 1 side by
# side in one graph; the step fails unless both ran every iteration, and the figures are per
# iteration of the two (median_ms = us_per_iteration x 2 x iterations). Small: 300 iterations,
# one timed step; bounded (timeout 60).
# Usage: loop_pair_test.sh TROUPE_BENCH
set -uo pipefail
bench=$1
out=$(timeout 60 "$bench" loop --body independent --parallel 2 --pair --interleave --iterations 300 --steps 1 \
  --threads 2 --json 2>&1) || { echo "loop_pair_test: FAILED: troupe-bench loop exited $?: $out" >&2; exit 1; }
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in sys.argv[1].splitlines() if l.startswith("{")]
def fail(why):
    sys.exit(f"loop_pair_test: FAILED: {why}\n{sys.argv[1]}")
if len(rows) != 2:
    fail(f"{len(rows)} JSON lines, not 2 (the P2 loop and the pair)")
single, pair = rows
if single["pair"] or single["parallel"] != 2 or not pair["pair"] or pair["parallel"] != 1:
    fail("not the P2 loop, then the pair")
for r, loops in ((single, 1), (pair, 2)):
    want = r["median_ms"] * 1000 / (loops * r["iterations"])
    if abs(r["us_per_iteration"] - want) > 0.0015 + 0.002 * want:
        fail(f"us_per_iteration {r['us_per_iteration']} is not median_ms per iteration of {loops} loop(s) ({want:.4f})")
print("loop_pair_test: passed")
PY
