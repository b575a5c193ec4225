#!/usr/bin/env bash
# troupe-fashion-mnist resumes exactly: with --threads 1 the MLP trained for 2 epochs in one run
# ends with the same train loss and test accuracy, to the last printed digit (the loss printed
# with 9 significant digits, the accuracy a count of hits over 10,000), as
#   (a) 1 epoch, a stop with a checkpoint at its end, and a resumed run for the second;
#   (b) a stop in the middle of epoch 1 (step 700 of 938) and a resumed run for the rest;
# and a third run on (b)'s directory finds nothing left to train.
# Why exactly: with one scheduler thread and single-threaded kernels every sum runs in the same
# order in every run; the checkpoint holds the weights and the momentum slots bit for bit; the
# input resumes at the same batch of the same sequence (each epoch's order is fixed by (seed,
# epoch), the position follows from the global step); and this model has no random op after
# its initializers, whose values the restore overwrites. In (b) the resumed run's epoch-2 loss
# is compared (epoch 1's average covers only the steps each run did).
# Usage: resume_test.sh PATH_TO_troupe-fashion-mnist   (about 15 s on 2 cores)
set -euo pipefail
app=$1
data=${TROUPE_FASHION_MNIST:-/usr/share/datasets/fashion-mnist}
if [[ ! -e $data/train-images-idx3-ubyte.gz && ! -e $data/train-images-idx3-ubyte ]]; then
  echo "skipped: no Fashion-MNIST in $data"
  exit 77
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
run() { timeout 60 "$app" --model mlp --threads 1 --epochs 2 --data "$data" --json "$@"; }
# The last JSON line's epoch, train loss and test accuracy.
last() { grep '^{' "$1" | tail -n 1 | python3 -c 'import json,sys; r=json.load(sys.stdin); print(r["epoch"], r["global_step"], r["train_loss"], r["test_accuracy"])'; }

run >"$work/whole.out"
expected=$(last "$work/whole.out")
echo "uninterrupted: epoch step loss accuracy = $expected"
status=0

run --checkpoint-dir "$work/a" --save-every-steps 400 --stop-after-epochs 1 >"$work/a1.out"
grep -q '^stopped at step 938 (epoch 2, batch 0)' "$work/a1.out" || { echo "FAIL: (a) did not stop after epoch 1"; cat "$work/a1.out"; exit 1; }
run --checkpoint-dir "$work/a" --save-every-steps 400 >"$work/a2.out"
grep -q '^resumed from step 938 (epoch 2, batch 0)' "$work/a2.out" || { echo "FAIL: (a) did not resume"; cat "$work/a2.out"; exit 1; }
got=$(last "$work/a2.out")
echo "(a) resumed at the end of epoch 1: $got"
[[ $got == "$expected" ]] || { echo "FAIL: (a) differs from the uninterrupted run"; status=1; }

run --checkpoint-dir "$work/b" --save-every-steps 0 --stop-after-steps 700 >"$work/b1.out"
grep -q '^stopped at step 700 (epoch 1, batch 700)' "$work/b1.out" || { echo "FAIL: (b) did not stop at step 700"; cat "$work/b1.out"; exit 1; }
run --checkpoint-dir "$work/b" >"$work/b2.out"
grep -q '^resumed from step 700 (epoch 1, batch 700)' "$work/b2.out" || { echo "FAIL: (b) did not resume"; cat "$work/b2.out"; exit 1; }
got=$(last "$work/b2.out")
echo "(b) resumed in the middle of epoch 1: $got"
[[ $got == "$expected" ]] || { echo "FAIL: (b) differs from the uninterrupted run"; status=1; }
[[ -d $work/b/ckpt-1876 ]] || { echo "FAIL: no checkpoint saved at the end (step 1876)"; ls "$work/b"; status=1; }
run --checkpoint-dir "$work/b" >"$work/b3.out"
grep -q '^nothing left to train: the checkpoint is at step 1876' "$work/b3.out" ||
  { echo "FAIL: a run after the last epoch trained again"; cat "$work/b3.out"; status=1; }

[[ $status == 0 ]] && echo "PASS: resumed runs end as the uninterrupted one"
exit $status
