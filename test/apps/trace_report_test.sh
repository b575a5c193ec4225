#!/usr/bin/env bash
# troupe-fashion-mnist --trace and its report: a single-process CNN run traces steps
# 10-12 and writes LOGDIR/report.html; troupe-trace summary's totals and critical paths match the
# trace's slices; the report names the run and holds one point per logged step; a cluster run's
# trace has a process row per task, the values that crossed as flows from one task to the other,
# and the summary names the pair; bad input to troupe-trace and --trace-steps is refused naming it.
# Usage: trace_report_test.sh TROUPE_FASHION_MNIST TROUPE_LAUNCH TROUPE_TRACE EVENT_FILE_DUMP
set -euo pipefail
app=$1
launch=$2
tracer=$3
dump=$4
source "$(dirname "$0")/training_test_lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "trace_report_test: FAILED: $*" >&2; exit 1; }

timeout 180 "$app" --model cnn --threads 1 --stop-after-steps 60 --logdir "$work/logs" --trace "$work/local.json" \
  --trace-steps 10-12 > "$work/local.out" 2>&1 || { cat "$work/local.out"; fail "the single-process run"; }
cat "$work/local.out"
grep -q "trace of steps 10-12: $work/local.json" "$work/local.out" || fail "the run did not say where the trace is"
grep -q "report: $work/logs/report.html" "$work/local.out" || fail "the run did not say where the report is"
"$tracer" summary "$work/local.json" > "$work/summary.txt" || fail "troupe-trace summary"
cat "$work/summary.txt"
grep -q '^3 traced step(s)' "$work/summary.txt" || fail "summary: not 3 steps"
grep -q '^per op type' "$work/summary.txt" || fail "summary: no op types"
grep -q '^critical path of step ' "$work/summary.txt" || fail "summary: no critical path"
"$tracer" summary --json "$work/local.json" > "$work/summary.json" || fail "troupe-trace summary --json"
"$dump" "$work/logs" > "$work/events.dump" || fail "no event file"
python3 - "$work/local.json" "$work/summary.json" "$work/logs/report.html" "$work/events.dump" <<'PY' || fail "the trace, summary or report"
import json, re, sys
trace = json.load(open(sys.argv[1]))
summary = json.load(open(sys.argv[2]))
report = open(sys.argv[3]).read()
events = trace["traceEvents"]
kernels = [e for e in events if e["ph"] == "X" and e.get("cat") == "kernel"]
ops = [e for e in events if e["ph"] == "X" and e.get("cat") in ("kernel", "variable")]
steps = [e for e in events if e["ph"] == "X" and e.get("cat") == "step"]
assert len(steps) == 3, f"{len(steps)} step slices"
assert sorted({k["args"]["step"] for k in kernels}) == sorted(s["args"]["step"] for s in steps), "kernels of other steps"
for k in kernels:
    for field in ("node", "op", "inputs", "step"):
        assert field in k["args"], f"a kernel slice without {field}: {k}"
# The summary's totals are the trace's.
assert abs(summary["kernel_us"] - sum(k["dur"] for k in kernels)) < 0.01 * len(kernels) + 0.01, "kernel time"
assert abs(summary["step_us"] - sum(s["dur"] for s in steps)) < 0.01 * len(steps) + 0.01, "step time"
assert sum(o["count"] for o in summary["op_types"]) == len(ops), "op counts"
assert abs(sum(o["total_us"] for o in summary["op_types"]) - sum(o["dur"] for o in ops)) < 0.01 * len(ops) + 0.01, "op time"
# One critical path per step (written a link at a time), each ending at a kernel of its step.
paths = summary["critical_path"]
assert sorted(paths) == sorted(str(s["args"]["step"]) for s in steps), f"critical paths of steps {sorted(paths)}"
for step, path in paths.items():
    assert path and all(set(l) == {"what", "where", "start_us", "dur_us", "gap_us"} for l in path), f"step {step}: {path[:2]}"
memory = [e for e in events if e["ph"] == "C" and e.get("cat") == "memory"]
assert memory and len(summary["memory"]) == 1, f"memory: {summary['memory']}"
assert summary["memory"][0]["peak_bytes"] == max(e["args"]["bytes"] for e in memory), "memory peak"
conv = [o for o in summary["op_types"] if o["name"] == "Conv2D"]
assert conv and conv[0]["count"] == 2 * 3, f"Conv2D: {conv}"
# The report names the run, and holds a point per logged step (every 20 of 60) and the accuracy.
assert "<title>troupe-fashion-mnist cnn" in report, "the report does not name the run"
loss_logged = [l for l in open(sys.argv[4]) if l.startswith("train/loss ")]
logged = int(loss_logged[0].split()[1])
assert logged == 3, f"{logged} loss points logged"
points = report.count('class="loss-point"')
assert points == logged, f"{points} loss points in the report"
assert report.count('class="rate-point"') == logged, "examples/s points"
assert report.count('class="accuracy-point"') == 1, "accuracy points"
assert report.count('class="op-bar"') >= 5, "op types"
assert not re.search(r'(src|href)="?https?:', report), "the report fetches something"
print("local trace, summary and report: consistent")
PY

timeout 240 "$launch" --ps 1 --workers 2 -- "$app" --model mlp --threads 1 --mode async --steps 150 \
  --trace "$work/cluster.json" --trace-steps 5-6 > "$work/cluster.out" 2>&1 || { cat "$work/cluster.out"; fail "the cluster run"; }
grep -q "worker:0: trace of its steps 5-6: $work/cluster.json" "$work/cluster.out" || { cat "$work/cluster.out"; fail "cluster: no trace said"; }
"$tracer" summary "$work/cluster.json" > "$work/cluster-summary.txt" || fail "troupe-trace summary of the cluster's trace"
cat "$work/cluster-summary.txt"
grep -Eq '^ +[0-9]+ +[0-9]+ .* ps:0 -> worker:0$' "$work/cluster-summary.txt" || fail "cluster summary: no ps:0 -> worker:0 transfers"
python3 - "$work/cluster.json" <<'PY' || fail "the cluster's trace"
import json, sys
trace = json.load(open(sys.argv[1]))
events = trace["traceEvents"]
names = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
ps = [p for p, n in names.items() if n.startswith("ps:0 at ")]
worker = [p for p, n in names.items() if n.startswith("worker:0 at ")]
assert ps and worker, f"process rows: {names}"
flows = {}
for e in events:
    if e["ph"] in ("s", "f"):
        flows.setdefault(e["id"], []).append((e["ph"], e["pid"]))
assert flows, "no flows"
for fid, ends in flows.items():
    assert sorted(ph for ph, _ in ends) == ["f", "s"], f"flow {fid}: {ends}"
    assert len({pid for _, pid in ends}) == 2, f"flow {fid} within one process"
for task in ("ps:0", "worker:0"):
    assert trace["otherData"]["clock_offsets"][task]["uncertainty_us"] >= 0, task
print(f"cluster trace: {len(flows)} values crossed, each a flow between two processes")
PY

# Refused, naming what is wrong (troupe-trace reads the file as it parses it, keeping only what
# the summary needs).
if "$tracer" summary "$work/nothing.json" > "$work/err" 2>&1; then fail "a missing trace file was accepted"; fi
if "$tracer" summary "$work/logs/report.html" > "$work/err" 2>&1; then fail "an HTML file was taken for a trace"; fi
grep -q "$work/logs/report.html is not JSON" "$work/err" || { cat "$work/err"; fail "no message naming the file"; }
echo '{"a": 1}' > "$work/other.json"
if "$tracer" summary "$work/other.json" > "$work/err" 2>&1; then fail "JSON without traceEvents was taken for a trace"; fi
grep -q "other.json: not a Chrome trace: no traceEvents array" "$work/err" || { cat "$work/err"; fail "no traceEvents: no message"; }
echo '{"traceEvents": [{"ph": "X", "pid": "one"}], "otherData": {"producer": "troupe"}}' > "$work/odd.json"
if "$tracer" summary "$work/odd.json" > "$work/err" 2>&1; then fail "a pid that is a string was accepted"; fi
grep -q "odd.json: traceEvents\[0\]: 'pid' is a string" "$work/err" || { cat "$work/err"; fail "a string pid: no message"; }
set +e
"$app" --trace "$work/x.json" --trace-steps 5-2 > "$work/err" 2>&1
code=$?
set -e
[[ $code == 2 ]] || fail "--trace-steps 5-2: exit $code"
grep -q "trace-steps: '5-2' is not a range" "$work/err" || { cat "$work/err"; fail "--trace-steps 5-2: no message"; }
echo "trace_report_test: passed"
