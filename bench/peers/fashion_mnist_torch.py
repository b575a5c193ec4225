#!/usr/bin/python3
"""PyTorch peer of Troupe's Fashion-MNIST app: the same models and recipe, the same JSON fields.

LeNet-style CNN (conv 32 5x5 SAME relu, max-pool 2, conv 64 5x5 SAME relu, max-pool 2,
dense 1024 relu, dense 10) or MLP 784-256-256-10, pixels scaled to [0,1], reshuffled every
epoch, SGD with momentum. Evaluates on the 10,000 test images after each epoch and prints one
JSON object per epoch with --json.

Run bench/peers/setup_torch.sh first (Debian's python3-torch, PyTorch 1.13), then e.g.
  /usr/bin/python3 bench/peers/fashion_mnist_torch.py --model cnn --threads 1 --json
PyTorch is fastest here with 1 thread or with OMP_WAIT_POLICY=PASSIVE set in the environment.
"""
import argparse
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from peer_common import find_idx as find, read_idx


class Cnn(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 5, padding=2)
        self.conv2 = nn.Conv2d(32, 64, 5, padding=2)
        self.fc1 = nn.Linear(64 * 7 * 7, 1024)
        self.fc2 = nn.Linear(1024, 10)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.conv1(x)), 2)
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(784, 256)
        self.fc2 = nn.Linear(256, 256)
        self.fc3 = nn.Linear(256, 10)

    def forward(self, x):
        x = x.flatten(1)
        return self.fc3(F.relu(self.fc2(F.relu(self.fc1(x)))))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", choices=["cnn", "mlp"], default="cnn")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--batch", type=int, default=64)
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--threads", type=int, default=0, help="0: PyTorch's default")
    ap.add_argument("--data", default="/usr/share/datasets/fashion-mnist")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    torch.manual_seed(a.seed)
    rng = np.random.default_rng(a.seed)
    train_x = torch.from_numpy(read_idx(find(a.data, "train-images-idx3-ubyte")).astype(np.float32) / 255.0).unsqueeze(1)
    train_y = torch.from_numpy(read_idx(find(a.data, "train-labels-idx1-ubyte")).astype(np.int64))
    test_x = torch.from_numpy(read_idx(find(a.data, "t10k-images-idx3-ubyte")).astype(np.float32) / 255.0).unsqueeze(1)
    test_y = torch.from_numpy(read_idx(find(a.data, "t10k-labels-idx1-ubyte")).astype(np.int64))

    model = Cnn() if a.model == "cnn" else Mlp()
    opt = torch.optim.SGD(model.parameters(), lr=a.lr, momentum=a.momentum)
    n = train_x.shape[0]
    for epoch in range(1, a.epochs + 1):
        model.train()
        order = torch.from_numpy(rng.permutation(n))
        start = time.perf_counter()
        total, count = 0.0, 0
        for i in range(0, n, a.batch):
            idx = order[i:i + a.batch]
            opt.zero_grad()
            loss = F.cross_entropy(model(train_x[idx]), train_y[idx])
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
            count += len(idx)
        seconds = time.perf_counter() - start
        model.eval()
        with torch.no_grad():
            correct = sum(int((model(test_x[i:i + 1000]).argmax(1) == test_y[i:i + 1000]).sum())
                          for i in range(0, test_x.shape[0], 1000))
        rec = {"system": "pytorch " + torch.__version__, "model": a.model, "epoch": epoch,
               "batch": a.batch, "threads": torch.get_num_threads(),
               "train_loss": round(total / count, 5), "test_accuracy": correct / test_x.shape[0],
               "epoch_seconds": round(seconds, 3), "examples_per_s": round(count / seconds, 1)}
        print(json.dumps(rec) if a.json else
              f"epoch {epoch}: loss {rec['train_loss']:.4f}, test accuracy {rec['test_accuracy']:.4f}, "
              f"{seconds:.1f} s ({rec['examples_per_s']:.0f} examples/s)", flush=True)


if __name__ == "__main__":
    main()
