#!/usr/bin/env bash
# Troupe's Fashion-MNIST app against PyTorch's (bench/peers/fashion_mnist_torch.py) with the same
# model and recipe, one after the other in one run.
# Usage: bench/peers/compare_fashion_mnist.sh [cnn|mlp] [epochs]
# PyTorch runs in the two configurations that are fastest on this machine (1 thread; 2 threads
# with OMP_WAIT_POLICY=PASSIVE) and with its defaults.
set -euo pipefail
cd "$(dirname "$0")/../.."
model=${1:-cnn}
epochs=${2:-3}
bash bench/peers/setup_torch.sh >/dev/null
source bench/peers/tagged_runs.sh
run "troupe, default threads" build/apps/troupe-fashion-mnist --model "$model" --epochs "$epochs" --json
run "torch, 1 thread" /usr/bin/python3 bench/peers/fashion_mnist_torch.py --model "$model" --epochs "$epochs" --threads 1 --json
run "torch, 2 threads, passive" env OMP_WAIT_POLICY=PASSIVE /usr/bin/python3 bench/peers/fashion_mnist_torch.py \
  --model "$model" --epochs "$epochs" --threads 2 --json
run "torch, defaults" /usr/bin/python3 bench/peers/fashion_mnist_torch.py --model "$model" --epochs "$epochs" --json
python3 - "$out" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
print()
print(f"{'configuration':26} {'model':5} {'threads':>7} {'epoch':>5} {'loss':>8} {'test acc':>8} {'seconds':>8} {'ex/s':>8}")
for r in rows:
    print(f"{r['config']:26} {r['model']:5} {r['threads']:>7} {r['epoch']:>5} {r['train_loss']:>8.4f} "
          f"{r['test_accuracy']:>8.4f} {r['epoch_seconds']:>8.2f} {r['examples_per_s']:>8.0f}")
PY
rm -f "$out"
