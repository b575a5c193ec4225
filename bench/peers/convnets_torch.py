#!/usr/bin/python3
"""PyTorch peer of `troupe-bench convnet`: the same four models, synthetic data, step and fields.

Models (soumith/convnet-benchmarks, as in ops/layers/convnets.hpp; no dropout, no auxiliary
heads, every convolution and hidden dense layer with bias and ReLU):
  alexnet    "one weird trick" AlexNet, 224x224          61,100,840 parameters
  overfeat   Overfeat fast, 231x231                      145,920,872
  vgg        VGG-A (VGG-11), 224x224                     132,863,336
  googlenet  GoogLeNet v1, 224x224 (defined here: torchvision's googlenet adds batch norm and
             uses 3x3 where v1 has 5x5)                  6,998,552
A step is forward, backward and an SGD update (lr 0.01) of every parameter on images and labels
made once on the device. FLOP rule (the same as Troupe's): 2 x multiply-adds of every
convolution and linear layer, forward, input gradient (none for the first convolution) and
weight gradient.

Run bench/peers/setup_torch.sh first (Debian's python3-torch, PyTorch 1.13), then e.g.
  /usr/bin/python3 bench/peers/convnets_torch.py --model alexnet --batch 16 --json
On a GPU (--device gpu), torch.backends.cudnn.benchmark is on and steps are synchronised.
"""
import argparse
import json
import resource
import statistics
import time

import torch
import torch.nn as nn


def conv(cin, cout, k, stride=1, pad=None):
    return [nn.Conv2d(cin, cout, k, stride, k // 2 if pad is None else pad), nn.ReLU(inplace=True)]


def hidden(nin, nout):
    return [nn.Linear(nin, nout), nn.ReLU(inplace=True)]


def alexnet():
    return nn.Sequential(
        *conv(3, 64, 11, 4, 2), nn.MaxPool2d(3, 2),
        *conv(64, 192, 5), nn.MaxPool2d(3, 2),
        *conv(192, 384, 3), *conv(384, 256, 3), *conv(256, 256, 3), nn.MaxPool2d(3, 2),
        nn.Flatten(), *hidden(256 * 6 * 6, 4096), *hidden(4096, 4096), nn.Linear(4096, 1000))


def overfeat():
    return nn.Sequential(
        *conv(3, 96, 11, 4, 0), nn.MaxPool2d(2),
        *conv(96, 256, 5, 1, 0), nn.MaxPool2d(2),
        *conv(256, 512, 3), *conv(512, 1024, 3), *conv(1024, 1024, 3), nn.MaxPool2d(2),
        nn.Flatten(), *hidden(1024 * 6 * 6, 3072), *hidden(3072, 4096), nn.Linear(4096, 1000))


def vgg_a():
    layers, cin = [], 3
    for v in [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]:
        if v == "M":
            layers.append(nn.MaxPool2d(2))
        else:
            layers += conv(cin, v, 3)
            cin = v
    return nn.Sequential(*layers, nn.Flatten(), *hidden(512 * 7 * 7, 4096), *hidden(4096, 4096),
                         nn.Linear(4096, 1000))


class Inception(nn.Module):
    def __init__(self, cin, b1, b3r, b3, b5r, b5, pp):
        super().__init__()
        self.b1 = nn.Sequential(*conv(cin, b1, 1))
        self.b3 = nn.Sequential(*conv(cin, b3r, 1), *conv(b3r, b3, 3))
        self.b5 = nn.Sequential(*conv(cin, b5r, 1), *conv(b5r, b5, 5))
        self.bp = nn.Sequential(nn.MaxPool2d(3, 1, 1), *conv(cin, pp, 1))

    def forward(self, x):
        return torch.cat([self.b1(x), self.b3(x), self.b5(x), self.bp(x)], 1)


def googlenet():
    pool = lambda: nn.MaxPool2d(3, 2, ceil_mode=True)  # 112 -> 56 -> 28 -> 14 -> 7
    return nn.Sequential(
        *conv(3, 64, 7, 2, 3), pool(),
        *conv(64, 64, 1), *conv(64, 192, 3), pool(),
        Inception(192, 64, 96, 128, 16, 32, 32), Inception(256, 128, 128, 192, 32, 96, 64), pool(),
        Inception(480, 192, 96, 208, 16, 48, 64), Inception(512, 160, 112, 224, 24, 64, 64),
        Inception(512, 128, 128, 256, 24, 64, 64), Inception(512, 112, 144, 288, 32, 64, 64),
        Inception(528, 256, 160, 320, 32, 128, 128), pool(),
        Inception(832, 256, 160, 320, 32, 128, 128), Inception(832, 384, 192, 384, 48, 128, 128),
        nn.AvgPool2d(7, 1), nn.Flatten(), nn.Linear(1024, 1000))


MODELS = {"alexnet": (alexnet, 224), "overfeat": (overfeat, 231), "vgg": (vgg_a, 224),
          "googlenet": (googlenet, 224)}


def forward_macs(model, images):
    """Multiply-adds of every convolution and linear layer in one forward pass, in call order."""
    macs = []

    def hook(module, inputs, output):
        if isinstance(module, nn.Conv2d):
            k = module.in_channels * module.kernel_size[0] * module.kernel_size[1] // module.groups
            macs.append(output.numel() * k)
        else:
            macs.append(output.numel() * module.in_features)

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, (nn.Conv2d, nn.Linear))]
    with torch.no_grad():
        model(images)
    for h in handles:
        h.remove()
    return macs


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", choices=sorted(MODELS), default="alexnet")
    p.add_argument("--batch", type=int, default=16)
    p.add_argument("--device", choices=["cpu", "gpu"], default="cpu")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=0, help="torch.set_num_threads; 0 keeps PyTorch's default")
    p.add_argument("--json", action="store_true")
    a = p.parse_args()

    if a.threads > 0:
        torch.set_num_threads(a.threads)
    dev = torch.device("cuda" if a.device == "gpu" else "cpu")
    if a.device == "gpu":
        torch.backends.cudnn.benchmark = True
    make, size = MODELS[a.model]
    torch.manual_seed(1)
    model = make().to(dev)
    images = torch.rand(a.batch, 3, size, size, device=dev)
    labels = torch.randint(0, 1000, (a.batch,), device=dev)
    macs = forward_macs(model, images)
    flops = 2 * (3 * sum(macs) - macs[0])
    params = sum(p.numel() for p in model.parameters())
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    sync = torch.cuda.synchronize if a.device == "gpu" else (lambda: None)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(images), labels)
        loss.backward()
        opt.step()
        return loss

    for _ in range(a.warmup):
        step()
    sync()
    if a.device == "gpu":
        torch.cuda.reset_peak_memory_stats()
    ms = []
    for _ in range(a.steps):
        start = time.perf_counter()
        loss = step()
        sync()
        ms.append((time.perf_counter() - start) * 1000)
    median, low = statistics.median(ms), min(ms)
    # PyTorch does not count CPU allocations; on the CPU compare max_rss_mib instead.
    peak_mib = round(torch.cuda.max_memory_allocated() / 2 ** 20) if a.device == "gpu" else None
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    out = {"system": "pytorch", "version": torch.__version__, "model": a.model, "batch": a.batch,
           "device": a.device,
           "device_name": torch.cuda.get_device_name() if a.device == "gpu" else "host CPU",
           "threads": torch.get_num_threads(), "parameters": params, "steps": a.steps,
           "median_ms": round(median, 2), "min_ms": round(low, 2),
           "images_per_s": round(a.batch / (median / 1000), 1), "step_gflop": round(flops / 1e9, 2),
           "gflops": round(flops / (median / 1000) / 1e9, 1), "peak_device_mib": peak_mib,
           "max_rss_mib": round(rss_mib), "loss": round(loss.item(), 4)}
    if a.json:
        print(json.dumps(out), flush=True)
    else:
        for k, v in out.items():
            print(f"  {k:16} {v}")


if __name__ == "__main__":
    main()
