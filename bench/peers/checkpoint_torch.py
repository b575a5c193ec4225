#!/usr/bin/env python3
"""PyTorch's side of troupe-bench checkpoint: torch.save and torch.load of the same tensors.

The tensors are those troupe-bench checkpoint saves: --tensors float32 tensors of equal size
adding up to --mib MiB. A save is torch.save into DIR/torch.pt followed by os.fsync of the file
(torch.save itself does not sync; without it the figure would be the page cache's speed, not
the disk's), then an fsync of DIR. A load is torch.load of that file after the page cache was
dropped for it (posix_fadvise DONTNEED after a sync), as troupe-bench does for its restores.
Prints one JSON line: {"system": "pytorch ...", "save_gbps": ..., "restore_gbps": ...}.
"""
import argparse
import json
import os
import statistics
import time

import torch


def drop_cache(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--mib", type=int, default=256)
    p.add_argument("--tensors", type=int, default=8)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--dir", required=True)
    p.add_argument("--json", action="store_true")
    a = p.parse_args()
    torch.set_num_threads(2)
    n = a.mib * 1024 * 1024 // 4 // a.tensors
    g = torch.Generator().manual_seed(1)
    tensors = {f"var_{i}": torch.rand(n, generator=g) for i in range(a.tensors)}
    nbytes = sum(t.numel() * 4 for t in tensors.values())
    path = os.path.join(a.dir, "torch.pt")
    saves, loads = [], []
    for _ in range(a.repeats):
        if os.path.exists(path):
            os.remove(path)
        t0 = time.perf_counter()
        with open(path, "wb") as f:
            torch.save(tensors, f)
            f.flush()
            os.fsync(f.fileno())
        dfd = os.open(a.dir, os.O_RDONLY)
        os.fsync(dfd)
        os.close(dfd)
        saves.append(time.perf_counter() - t0)
        drop_cache(path)
        t0 = time.perf_counter()
        back = torch.load(path)
        loads.append(time.perf_counter() - t0)
        assert torch.equal(back["var_0"], tensors["var_0"])
        del back
    os.remove(path)
    out = {
        "system": f"pytorch {torch.__version__} torch.save/torch.load",
        "bytes": nbytes,
        "save_gbps": nbytes / statistics.median(saves) / 1e9,
        "restore_gbps": nbytes / statistics.median(loads) / 1e9,
        "save_s": saves,
        "restore_s": loads,
    }
    print(json.dumps(out))


if __name__ == "__main__":
    main()
