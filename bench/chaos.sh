#!/usr/bin/env bash
# The chaos run: a local cluster (2 ps, 3 workers, 1 spare) trains the Fashion-MNIST CNN in sync
# mode with one backup worker, by troupe-launch with every recovery on (--restart-ps,
# --restart-workers, --hang-timeout 3; the spare stands by, since every ps task is started
# again), while this script sends a random ps or worker SIGKILL or
# SIGSTOP every 30-60 s for MINUTES minutes. Then the same job runs undisturbed for the same
# number of global steps. It reports every disruption with the time until the job went on (from
# the signal to the chief's "recovered" line for a ps, to the worker's "rejoined" line for a
# worker) and the global steps whose updates were lost, the final test accuracy of both runs, and
# each task's resident memory (VmRSS and its peak VmHWM, sampled every 2 s) a minute after its
# longest-running process started and 15 s before it ended (before the chief's final evaluation). Nothing may hang: each run has a hard time limit (3 x MINUTES + 10 minutes),
# and the script fails (exit 1) when it is reached or when a job fails.
# Usage: bench/chaos.sh [MINUTES [STEPS [SEED]]]   (default 10 minutes, 4000 global steps, seed $RANDOM)
#   BUILD=DIR picks the build folder (default build); OUT=DIR keeps the logs there (default: a
#   new directory under /tmp, printed).
set -euo pipefail
cd "$(dirname "$0")/.."
minutes=${1:-10}
steps=${2:-4000}
seed=${3:-$RANDOM}
build=${BUILD:-build}
launch=$build/apps/troupe-launch
app=$build/apps/troupe-fashion-mnist
[[ -x $launch && -x $app ]] || { echo "chaos: no $launch or $app: run tools/test.sh first" >&2; exit 2; }
out=${OUT:-$(mktemp -d /tmp/troupe-chaos-XXXXXX)}
mkdir -p "$out"
RANDOM=$seed
limit=$((minutes * 3 * 60 + 600))
echo "chaos: $minutes min of disruptions, $steps global steps, seed $seed, logs in $out (each run at most $limit s)"

job_pid=
cleanup() { [[ -n $job_pid ]] && kill "$job_pid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT

# run NAME CHAOS(0|1): one job; its lines stamped with the time they came ($EPOCHREALTIME).
run() {
  local name=$1 chaos=$2 dir=$out/$1
  rm -rf "$dir"
  mkdir -p "$dir"
  ( "$launch" --dir "$dir" --ps 2 --spares 1 --workers 3 --backup-workers 1 --restart-ps 1000 --restart-workers 1000 \
      --hang-timeout 3 -- "$app" --model cnn --mode sync --threads 1 --steps "$steps" \
      --checkpoint-dir "$dir/ckpt" --save-every-steps 200 --json 2>&1 \
      | while IFS= read -r line; do printf '%s %s\n' "$EPOCHREALTIME" "$line"; done > "$dir/log" ) &
  job_pid=$!
  local start=$SECONDS next=$((SECONDS + 30 + RANDOM % 31)) end_chaos=$((SECONDS + minutes * 60))
  local deadline=$((SECONDS + limit)) sampled=0
  : > "$dir/events"
  : > "$dir/rss"
  while kill -0 "$job_pid" 2>/dev/null; do
    if (( SECONDS > deadline )); then
      echo "chaos: $name did not finish within $limit s: stopping it" >&2
      kill "$job_pid"
      tail -40 "$dir/log" >&2
      exit 1
    fi
    if (( SECONDS - sampled >= 2 )); then
      sampled=$SECONDS
      for f in "$dir"/*.pid; do
        [[ -e $f ]] || continue
        local task pid rss
        task=$(basename "$f" .pid)
        pid=$(cat "$f")
        rss=$(awk '/^VmRSS:/ {r=$2} /^VmHWM:/ {h=$2} END {if (r) print r, h}' "/proc/$pid/status" 2>/dev/null || true)
        [[ -n $rss ]] && echo "$EPOCHREALTIME $task $pid $rss" >> "$dir/rss"
      done
    fi
    if (( chaos && SECONDS >= next && SECONDS < end_chaos )); then
      local victims=(ps-0 ps-1 worker-0 worker-1 worker-2) signals=(KILL STOP)
      local victim=${victims[RANDOM % 5]} signal=${signals[RANDOM % 2]}
      local pid
      pid=$(cat "$dir/$victim.pid" 2>/dev/null || true)
      if [[ -n $pid ]] && kill -"$signal" "$pid" 2>/dev/null; then
        echo "$EPOCHREALTIME ${victim/-/:} $signal $pid" >> "$dir/events"
        echo "chaos: $name: SIG$signal to ${victim/-/:} (pid $pid) at $((SECONDS - start)) s"
      fi
      next=$((SECONDS + 30 + RANDOM % 31))
    fi
    sleep 0.5
  done
  local rc=0
  wait "$job_pid" || rc=$?
  job_pid=
  if [[ $rc != 0 ]] || ! grep -q 'troupe-launch: every worker finished' "$dir/log"; then
    echo "chaos: the $name job failed:" >&2
    tail -40 "$dir/log" >&2
    exit 1
  fi
}

run chaos 1
run calm 0

python3 - "$out" "$steps" <<'EOF'
import json, re, sys
out, steps = sys.argv[1], int(sys.argv[2])
def lines(name):
    for l in open(f"{out}/{name}/log"):
        t, _, text = l.rstrip("\n").partition(" ")
        yield float(t), text
def summary(name):
    for _, text in lines(name):
        if text.startswith("[worker:0] {"):
            s = json.loads(text[text.index("{"):])
    return s
log = list(lines("chaos"))
print(f"disruptions (SIGKILL or SIGSTOP; back = from the signal to the job going on with that task):")
backs = []
for e in open(f"{out}/chaos/events"):
    t, task, signal, pid = e.split()
    t = float(t)
    if task.startswith("ps"):
        pattern = re.compile(rf"^\[worker:0\] worker:0: recovered from the loss of .*\b{re.escape(task)}\b")
    else:
        pattern = re.compile(rf"^\[{re.escape(task)}\] (worker:\d+: rejoined the job|worker:\d+: recovered)")
    hit = next(((lt, text) for lt, text in log if lt > t and pattern.search(text)), None)
    if hit is None:
        print(f"  {task:9} SIG{signal:4}: no recovery seen (the job ended first, or the task was not needed)")
        continue
    lost = re.search(r"the updates of (\d+) global step", hit[1])
    backs.append(hit[0] - t)
    print(f"  {task:9} SIG{signal:4}: back after {hit[0] - t:6.2f} s" + (f", updates of {lost.group(1)} global steps lost" if lost else ""))
chaos, calm = summary("chaos"), summary("calm")
print(f"recoveries: {len(backs)}, longest {max(backs) if backs else 0:.2f} s, median {sorted(backs)[len(backs)//2] if backs else 0:.2f} s")
print(f"test accuracy after {steps} global steps: with chaos {chaos['test_accuracy']:.4f}, undisturbed {calm['test_accuracy']:.4f}")
print(f"global steps/s: with chaos {chaos['global_steps_per_s']:.2f}, undisturbed {calm['global_steps_per_s']:.2f}")
for name in ("chaos", "calm"):
    per = {}
    for l in open(f"{out}/{name}/rss"):
        t, task, pid, rss, hwm = l.split()
        per.setdefault(task, {}).setdefault(pid, []).append((float(t), int(rss), int(hwm)))
    print(f"memory ({name}): each task's longest-running process, a minute after it started -> 15 s before it ended (RSS, peak RSS):")
    for task in sorted(per):
        pid, samples = max(per[task].items(), key=lambda kv: kv[1][-1][0] - kv[1][0][0])
        warm = next((s for s in samples if s[0] >= samples[0][0] + 60), samples[0])
        # (Not the last 15 s: the chief's evaluation of the test set at the end, and its exit.)
        end = max((s for s in samples if s[0] <= samples[-1][0] - 15), default=samples[-1], key=lambda s: s[0])
        if end[0] < warm[0]: end = warm
        print(f"  {task.replace('-', ':'):9} pid {pid:>7}: RSS {warm[1]/1024:6.1f} -> {end[1]/1024:6.1f} MiB, "
              f"peak {warm[2]/1024:6.1f} -> {end[2]/1024:6.1f} MiB over {end[0] - warm[0]:4.0f} s "
              f"({len(per[task])} process(es) of this task)")
EOF
