#!/usr/bin/env bash
# TensorBoard's own reader parses troupe-fashion-mnist --logdir's event files: the
# tensorboard package from PyPI, in a virtual environment this script makes once
# (TROUPE_TENSORBOARD_VENV, default ~/.cache/troupe/tensorboard-venv), reads them with its
# EventAccumulator and finds every scalar at the steps written. Exits 77 (skipped) where the
# package cannot be installed (no network, no venv module) or the Fashion-MNIST files are missing.
# Usage: tensorboard_reader_test.sh TROUPE_FASHION_MNIST
set -euo pipefail
app=$1
source "$(dirname "$0")/training_test_lib.sh"
venv=${TROUPE_TENSORBOARD_VENV:-$HOME/.cache/troupe/tensorboard-venv}
if ! "$venv/bin/python" -c 'import tensorboard' 2>/dev/null; then
  rm -rf "$venv"
  if ! { python3 -m venv "$venv" && timeout 300 "$venv/bin/pip" install -q tensorboard; } >/dev/null 2>&1; then
    echo "skipped: the tensorboard package could not be installed into $venv"
    rm -rf "$venv"
    exit 77
  fi
fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
timeout 120 "$app" --model mlp --threads 1 --stop-after-steps 60 --logdir "$work/logs" > "$work/out" 2>&1 \
  || { cat "$work/out"; echo "tensorboard_reader_test: FAILED: the training run" >&2; exit 1; }
"$venv/bin/python" - "$work/logs" <<'PY'
import sys
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
acc = EventAccumulator(sys.argv[1])
acc.Reload()
tags = sorted(acc.Tags()["scalars"])
want = ["test/accuracy", "train/examples_per_s", "train/learning_rate", "train/loss"]
assert tags == want, f"scalar tags {tags}, expected {want}"
for tag in want[1:]:
    steps = [e.step for e in acc.Scalars(tag)]
    assert steps == [20, 40, 60], f"{tag}: steps {steps}"
assert all(abs(e.value - 0.01) < 1e-7 for e in acc.Scalars("train/learning_rate"))
accuracy = acc.Scalars("test/accuracy")
assert len(accuracy) == 1 and accuracy[0].step == 60 and 0.1 < accuracy[0].value <= 1, accuracy
print("TensorBoard read:", {t: [(e.step, round(e.value, 4)) for e in acc.Scalars(t)] for t in want})
PY
echo "tensorboard_reader_test: passed"
