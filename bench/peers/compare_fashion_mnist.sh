#!/usr/bin/env bash
# Troupe's Fashion-MNIST app against PyTorch's (bench/peers/fashion_mnist_torch.py) with the same
# model and recipe, one after the other in one run.
# Usage: bench/peers/compare_fashion_mnist.sh [mlp|cnn] [epochs]
# PyTorch runs in its best configuration on this machine (1 thread) and with its default.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-mlp}
epochs=${2:-3}
bash bench/peers/setup_torch.sh >/dev/null
out=$(mktemp)
build/apps/troupe-fashion-mnist --model "$model" --epochs "$epochs" --json | tee -a "$out"
/usr/bin/python3 bench/peers/fashion_mnist_torch.py --model "$model" --epochs "$epochs" --threads 1 --json | tee -a "$out"
/usr/bin/python3 bench/peers/fashion_mnist_torch.py --model "$model" --epochs "$epochs" --json | tee -a "$out"
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
print()
print(f"{'system':18} {'model':5} {'threads':>7} {'epoch':>5} {'loss':>8} {'test acc':>8} {'seconds':>8} {'ex/s':>8}")
for r in rows:
    print(f"{r['system']:18} {r['model']:5} {r['threads']:>7} {r['epoch']:>5} {r['train_loss']:>8.4f} "
          f"{r['test_accuracy']:>8.4f} {r['epoch_seconds']:>8.2f} {r['examples_per_s']:>8.0f}")
PY
rm -f "$out"
