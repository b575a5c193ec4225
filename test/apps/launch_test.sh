#!/usr/bin/env bash
# troupe-launch (apps/troupe_launch.cpp): a job of ps tasks (troupe-node) and workers (a given
# command) on free loopback ports. Checks that each worker gets --cluster SPEC --task worker:K and
# its lines come prefixed by its task, that the ps tasks are stopped when the workers are done,
# that a failing worker fails the job naming it, and that SIGINT stops every process.
# Usage: launch_test.sh TROUPE_LAUNCH
set -euo pipefail
launch=$1
work=$(mktemp -d)
launcher=""
cleanup() {
  if [[ -n $launcher ]] && kill -0 "$launcher" 2>/dev/null; then kill -KILL "$launcher" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "launch_test: FAILED: $*" >&2; cat "$work"/*.log >&2 2>/dev/null || true; exit 1; }

# No process of a finished job is left: nothing runs with its spec directory on its command line.
nothing_left() {
  local spec_dir
  spec_dir=$(sed -n 's/.*spec \(.*\)\/cluster.json$/\1/p' "$1" | head -1)
  [[ -n $spec_dir ]] || fail "no spec named in $1"
  [[ ! -d $spec_dir ]] || fail "the spec directory $spec_dir was left behind"
  if pgrep -f -- "$spec_dir" >/dev/null; then fail "processes of $spec_dir still run: $(pgrep -fa -- "$spec_dir")"; fi
}

# 1. Two workers that check their arguments and the spec; a ps task stopped at the end.
"$launch" --ps 1 --workers 2 -- bash -c '[[ $0 == --cluster && $2 == --task ]] && grep -q "\"ps\"" "$1" && echo "hello from $3"' \
  > "$work/ok.log" 2>&1 || fail "a job whose workers succeed did not exit 0"
grep -q '^\[worker:0\] hello from worker:0$' "$work/ok.log" || fail "worker:0's line"
grep -q '^\[worker:1\] hello from worker:1$' "$work/ok.log" || fail "worker:1's line"
grep -q '^\[ps:0\] .*ps:0: started on 127.0.0.1:' "$work/ok.log" || fail "ps:0 did not start"
grep -q '^\[ps:0\] .*ps:0: stopped$' "$work/ok.log" || fail "ps:0 was not stopped cleanly"
nothing_left "$work/ok.log"

# 2. A worker that fails fails the job, naming it.
if "$launch" --ps 1 --workers 2 -- bash -c 'exit $(( ${3#worker:} * 3 ))' > "$work/fail.log" 2>&1; then
  fail "a job whose worker:1 exits with 3 exited 0"
fi
grep -q 'the job failed: worker:1 exited with 3' "$work/fail.log" || fail "the failing worker is not named"
nothing_left "$work/fail.log"

# 2b. A failed worker stops the others at once (they may be waiting for it), naming it.
start=$SECONDS
if "$launch" --ps 1 --workers 2 -- bash -c '[[ $3 == worker:1 ]] && exit 4; sleep 60.75' > "$work/stop.log" 2>&1; then
  fail "a job whose worker:1 exits with 4 exited 0"
fi
(( SECONDS - start < 30 )) || fail "worker:0 was not stopped when worker:1 failed ($((SECONDS - start)) s)"
grep -q 'the job failed: worker:1 exited with 4' "$work/stop.log" || fail "the failed worker is not named"
nothing_left "$work/stop.log"

# 2c. The chief's progress lines make the job's progress display (not a terminal: [job] lines),
# and --backup-workers is passed on to the workers.
"$launch" --ps 1 --workers 2 --backup-workers 1 -- bash -c '[[ $1 == --backup-workers && $2 == 1 ]] || exit 5; [[ $6 == worker:0 ]] && { echo "progress: step 1"; echo "progress: step 2"; }; true' \
  x > "$work/progress.log" 2>&1 || fail "the progress job failed: $(cat "$work/progress.log")"
grep -q '^\[job\] step 2$' "$work/progress.log" || fail "the last progress is not shown as [job]"
if grep -q 'progress: ' "$work/progress.log"; then fail "progress lines were printed as they came"; fi

# 3. SIGINT stops every process, and what a worker started itself (its process group).
"$launch" --ps 2 --workers 1 -- bash -c 'echo waiting; sleep 61.25; echo done' > "$work/int.log" 2>&1 &
launcher=$!
for _ in $(seq 1 300); do
  grep -q '^\[worker:0\] waiting$' "$work/int.log" && break
  sleep 0.1
done
grep -q '^\[worker:0\] waiting$' "$work/int.log" || fail "the job did not start within 30 s"
kill -INT "$launcher"
code=0
for _ in $(seq 1 300); do kill -0 "$launcher" 2>/dev/null || break; sleep 0.1; done
kill -0 "$launcher" 2>/dev/null && fail "troupe-launch did not stop within 30 s of SIGINT"
wait "$launcher" || code=$?
launcher=""
[[ $code == 1 ]] || fail "a job stopped by SIGINT exited $code, not 1"
grep -q 'the job failed: stopped by a signal' "$work/int.log" || fail "the stop is not explained"
nothing_left "$work/int.log"
if pgrep -f 'sleep 61.25' >/dev/null; then fail "the worker's own child (sleep) was left running"; fi
# 4. --hosts and --hostfile refused by name before anything starts (the ssh side: hosts_training_test.sh).
refused() {  # refused WHAT EXPECTED_CODE TEXT LAUNCH_ARGS...
  local what=$1 expected=$2 text=$3 code=0
  shift 3
  "$launch" "$@" -- true > "$work/refused.log" 2>&1 || code=$?
  [[ $code == "$expected" ]] || fail "$what: exit $code, not $expected"
  grep -qF -e "$text" "$work/refused.log" || fail "$what: no '$text' in: $(cat "$work/refused.log")"
}
refused "too few slots" 1 "the job has 4 tasks and the hosts 3 slot(s)" --hosts a,b:2 --ps 1 --workers 3
refused "a slot count of 0" 2 "slots must be a number of at least 1, got '0'" --hosts a:0
refused "slots taken by ps tasks" 2 "the hosts have 2 slot(s), all taken by the ps tasks and spares" --hosts a,b --ps 2
printf 'a slots=2\n# a comment\nb oops\n' > "$work/hostfile"
refused "a bad hostfile line" 2 "--hostfile $work/hostfile line 3: expected HOST slots=N, got 'b oops'" --hostfile "$work/hostfile"
refused "an unset --env" 2 "--env TROUPE_SURELY_UNSET: it is not set here" --hosts a,b -x TROUPE_SURELY_UNSET
echo "launch_test: passed"
