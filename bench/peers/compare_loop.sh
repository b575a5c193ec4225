#!/usr/bin/env bash
# Troupe's while loop against TensorFlow's, in one run, one after the other: the cost
# of an iteration of a trivial body, an independent one and one that carries a matrix to the next
# iteration (dependent), parallel_iterations 1 and 10.
# Usage: bench/peers/compare_loop.sh [iterations] [steps] [rounds]
# rounds: how many times each pair runs (default 1), the two systems alternating (which goes
# first alternates from pair to pair); with more than
# one, the summary gives the medians, in how many rounds Troupe was the cheaper, and each
# system's P1 / P10 (what running iterations side by side gains) as the median of the rounds'.
# Needs build/bench/troupe-bench (tools/test.sh builds it) and the TF peer
# (bench/peers/setup_tf.sh installs it into bench/peers/.venv-tf).
set -euo pipefail
cd "$(dirname "$0")/../.."
iterations=${1:-100000}
steps=${2:-5}
rounds=${3:-1}
bash bench/peers/setup_tf.sh >/dev/null
python=bench/peers/.venv-tf/bin/python
source bench/peers/tagged_runs.sh  # run LABEL COMMAND...: the JSON lines into $out, "config": the round
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
troupe() {
  run "$1" build/bench/troupe-bench loop --body "$2" --parallel "$3" --iterations "$iterations" --steps "$steps" \
    --threads 2 --json
}
tensorflow() {
  # TensorFlow logs its start-up to stderr; keep it out of the table, show it on failure.
  if ! run "$1" "$python" bench/peers/loop_tf.py --body "$2" --parallel "$3" --iterations "$iterations" \
      --steps "$steps" --threads 2 --json 2>"$err"; then
    cat "$err" >&2
    exit 1
  fi
}
for round in $(seq "$rounds"); do
  for body in trivial independent dependent; do
    for parallel in 1 10; do
      in_turn troupe tensorflow "$round" "$body" "$parallel"  # which goes first alternates (tagged_runs.sh)
    done
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    r["round"] = int(r["config"])
print()
print(f"{'round':>5} {'body':12} {'parallel':>8} {'system':18} {'us/iteration':>13} {'ms/step':>9}")
for r in rows:
    print(f"{r['round']:>5} {r['body']:12} {r['parallel']:>8} {r['system']:18} {r['us_per_iteration']:>13.3f} {r['median_ms']:>9.1f}")
rounds = sorted({r["round"] for r in rows})
if len(rounds) > 1:
    def cost(n, body, parallel, troupe):
        for r in rows:
            if r["round"] == n and r["body"] == body and r["parallel"] == parallel and (r["system"] == "troupe") == troupe:
                return r["us_per_iteration"]
    print()
    print(f"{'body':12} {'parallel':>8} {'us/iteration, Troupe':>21} {'TensorFlow':>11} {'Troupe cheaper':>15}")
    for body in ("trivial", "independent", "dependent"):
        for parallel in (1, 10):
            pairs = [(cost(n, body, parallel, True), cost(n, body, parallel, False)) for n in rounds]
            pairs = [(t, f) for t, f in pairs if t is not None and f is not None]
            if pairs:
                print(f"{body:12} {parallel:>8} {statistics.median(t for t, _ in pairs):>21.3f} "
                      f"{statistics.median(f for _, f in pairs):>11.3f} {f'{sum(t <= f for t, f in pairs)} of {len(pairs)}':>15}")
    for troupe, name in ((True, "Troupe"), (False, "TensorFlow")):
        p1_p10 = [(cost(n, "independent", 1, troupe), cost(n, "independent", 10, troupe)) for n in rounds]
        gains = [p1 / p10 for p1, p10 in p1_p10 if p1 and p10]
        if gains:
            print(f"independent body, P1 / P10, {name}: median {statistics.median(gains):.2f} "
                  f"(rounds: {', '.join(f'{g:.2f}' for g in gains)})")
PY
