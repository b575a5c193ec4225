#!/usr/bin/env bash
# Troupe's executor against TensorFlow's on the same graphs, in one run, one after the other.
# Usage: bench/peers/compare_executor.sh [nodes] [steps] [threads] [rounds]
# threads: both systems' inter-op threads (default: 2; TensorFlow's intra-op threads are 1).
# rounds: how many times each pair runs (default 1), the two systems alternating (which goes
# first alternates from pair to pair), so that a minute in which the machine runs slow falls on
# both: the table gives each pair's figures per round, and the summary the medians, and in how
# many rounds Troupe was the cheaper. Besides the cost per node: the set-up (the first run, which
# builds the executable) and the teardown (the session's end).
# Needs build/bench/troupe-bench (tools/test.sh builds it) and the TF peer
# (bench/peers/setup_tf.sh installs it into bench/peers/.venv-tf).
set -euo pipefail
cd "$(dirname "$0")/../.."
nodes=${1:-10000}
steps=${2:-20}
threads=${3:-2}
rounds=${4:-1}
bash bench/peers/setup_tf.sh >/dev/null
python=bench/peers/.venv-tf/bin/python
source bench/peers/tagged_runs.sh  # run LABEL COMMAND...: the JSON lines into $out, "config": the round
err=$(mktemp)
trap 'rm -f "$out" "$err"' EXIT
troupe() {
  run "$1" build/bench/troupe-bench executor --shape "$2" --nodes "$nodes" --steps "$steps" --threads "$threads" --json
}
tensorflow() {
  # TensorFlow logs its start-up to stderr; keep it out of the table, show it on failure.
  if ! run "$1" "$python" bench/peers/executor_tf.py --shape "$2" --nodes "$nodes" --steps "$steps" \
      --threads "$threads" --json 2>"$err"; then
    cat "$err" >&2
    exit 1
  fi
}
for round in $(seq "$rounds"); do
  for shape in chain fanout random; do
    in_turn troupe tensorflow "$round" "$shape"  # which goes first alternates (tagged_runs.sh)
  done
done
python3 - "$out" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
for r in rows:
    r["round"] = int(r["config"])
print()
print(f"{'round':>5} {'shape':8} {'system':18} {'threads':>7} {'us/node':>9} {'M nodes/s':>10} {'ms/step':>9} {'setup ms':>9} "
      f"{'teardown ms':>12}")
for r in rows:
    print(f"{r['round']:>5} {r['shape']:8} {r['system']:18} {r['threads']:>7} {r['us_per_node']:>9.3f} "
          f"{r['nodes_per_s']/1e6:>10.2f} {r['median_step_ms']:>9.3f} {r.get('setup_ms', 0):>9.1f} "
          f"{r.get('teardown_ms', 0):>12.1f}")
rounds = sorted({r["round"] for r in rows})
if len(rounds) > 1:
    print()
    print(f"{'shape':8} {'us/node, Troupe':>16} {'TensorFlow':>11} {'Troupe cheaper':>15} {'set-up ratio':>13} {'at most 1/5':>12} "
          f"{'teardown ms, Troupe':>20} {'TensorFlow':>11}")
    for shape in ("chain", "fanout", "random"):
        pairs = []
        for n in rounds:
            t = [r for r in rows if r["round"] == n and r["shape"] == shape and r["system"] == "troupe"]
            f = [r for r in rows if r["round"] == n and r["shape"] == shape and r["system"] != "troupe"]
            if t and f:
                pairs.append((t[0], f[0]))
        if not pairs:
            continue
        cheaper = sum(t["us_per_node"] <= f["us_per_node"] for t, f in pairs)
        setup = [t["setup_ms"] / f["setup_ms"] for t, f in pairs]
        print(f"{shape:8} {statistics.median(t['us_per_node'] for t, _ in pairs):>16.3f} "
              f"{statistics.median(f['us_per_node'] for _, f in pairs):>11.3f} {f'{cheaper} of {len(pairs)}':>15} "
              f"{statistics.median(setup):>13.2f} {f'{sum(s <= 0.2 for s in setup)} of {len(setup)}':>12} "
              f"{statistics.median(t.get('teardown_ms', 0) for t, _ in pairs):>20.1f} "
              f"{statistics.median(f.get('teardown_ms', 0) for _, f in pairs):>11.1f}")
PY
