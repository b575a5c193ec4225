#!/usr/bin/env bash
# troupe-fashion-mnist --logdir: TensorBoard event files with the run's scalars, from a
# single process (every 20 steps, and the test accuracy at the end) and from a cluster's chief
# (at its progress reports and the end), read back with event_file_dump (read_event_file).
# Usage: logdir_test.sh TROUPE_FASHION_MNIST TROUPE_LAUNCH EVENT_FILE_DUMP
set -euo pipefail
app=$1
launch=$2
dump=$3
source "$(dirname "$0")/training_test_lib.sh"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "logdir_test: FAILED: $*" >&2; exit 1; }

timeout 120 "$app" --model mlp --threads 1 --stop-after-steps 100 --logdir "$work/local" > "$work/local.out" 2>&1 \
  || { cat "$work/local.out"; fail "the single-process run"; }
"$dump" "$work/local" > "$work/local.dump" || fail "no readable event file from the single-process run"
cat "$work/local.dump"
grep -qx 'version brain.Event:2' "$work/local.dump" || fail "local: no file version"
grep -q '^train/loss 5 100 ' "$work/local.dump" || fail "local: not 5 loss points up to step 100"
grep -q '^train/examples_per_s 5 100 ' "$work/local.dump" || fail "local: no examples/s"
grep -q '^train/learning_rate 5 100 ' "$work/local.dump" || fail "local: no learning rate"
grep -q '^test/accuracy 1 100 0\.[0-9]' "$work/local.dump" || fail "local: no test accuracy at step 100"

timeout 180 "$launch" --ps 1 --workers 2 -- "$app" --model mlp --threads 1 --mode sync --steps 200 \
  --logdir "$work/cluster" > "$work/cluster.out" 2>&1 || { cat "$work/cluster.out"; fail "the cluster run"; }
"$dump" "$work/cluster" > "$work/cluster.dump" || fail "no readable event file from the chief"
cat "$work/cluster.dump"
grep -q '^train/loss [1-9][0-9]* 200 ' "$work/cluster.dump" || fail "cluster: no loss up to global step 200"
grep -q '^train/dropped_gradients [1-9][0-9]* 200 0$' "$work/cluster.dump" || fail "cluster: no dropped gradients"
grep -q '^test/accuracy 1 200 0\.[0-9]' "$work/cluster.dump" || fail "cluster: no test accuracy"
echo "logdir_test: passed"
