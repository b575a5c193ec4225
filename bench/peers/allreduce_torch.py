#!/usr/bin/env python3
"""PyTorch's gloo all-reduce among N processes on 127.0.0.1: the peer of `troupe-bench allreduce`.

  /usr/bin/python3 bench/peers/allreduce_torch.py [--procs 2,3,4] [--mib 1,16,64] [--steps 10] [--warmup 2] [--json]

For each process count it starts that many processes (torch.multiprocessing, each one
torch.distributed with the gloo backend over TCP on 127.0.0.1, rendezvous on a free port); each
sums a float32 tensor of each size `steps` times after `warmup` untimed ones, a barrier before
each timed one. Rank 0 reports the median time and the bus bandwidth 2(N-1)/N x bytes / time,
in the same form as troupe-bench allreduce. Installed by bench/peers/setup_torch.sh.
--hosts NS=ADDRESS,... puts rank k in the k-th network namespace (it enters it before gloo
starts, over the namespace's eth0), the rendezvous at the first address: bench/shaped_links.sh.
"""
import argparse
import json
import os
import socket
import statistics
import sys
import time


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def enter_netns(name):
    """Moves this process's thread into network namespace `name` (before any other thread starts)."""
    import ctypes
    libc = ctypes.CDLL(None, use_errno=True)
    with open(f"/var/run/netns/{name}") as f:
        if libc.setns(f.fileno(), 0x40000000) != 0:  # CLONE_NEWNET
            raise OSError(ctypes.get_errno(), f"cannot enter network namespace {name}")
    os.environ["GLOO_SOCKET_IFNAME"] = "eth0"


def run(rank, world, port, args, queue):
    address = "127.0.0.1"
    if args.hosts:
        enter_netns(args.hosts[rank][0])
        address = args.hosts[0][1]
    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"tcp://{address}:{port}", rank=rank, world_size=world,
                            timeout=__import__("datetime").timedelta(seconds=120))
    for mib in args.mib:
        t = torch.zeros(int(mib * (1 << 20) / 4), dtype=torch.float32)
        times = []
        for i in range(args.warmup + args.steps):
            dist.barrier()
            start = time.perf_counter()
            dist.all_reduce(t)
            if i >= args.warmup:
                times.append(time.perf_counter() - start)
        if rank == 0:
            median = statistics.median(times)
            queue.put({"system": "pytorch-gloo", "procs": world, "mib": mib, "float16": False, "steps": args.steps,
                       "median_ms": round(median * 1e3, 3), "min_ms": round(min(times) * 1e3, 3),
                       "busbw_gbps": round(2 * (world - 1) / world * t.numel() * 4 / median / 1e9, 3)})
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--procs", default="2,3,4")
    p.add_argument("--mib", default="1,16,64")
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--json", action="store_true")
    p.add_argument("--hosts", default="", help="NS=ADDRESS per process (default: 127.0.0.1)")
    args = p.parse_args()
    args.mib = [float(m) for m in args.mib.split(",")]
    args.hosts = [tuple(h.split("=", 1)) for h in args.hosts.split(",")] if args.hosts else []
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    if not args.json:
        print(f"{'procs':<6} {'MiB':>8} {'median ms':>12} {'min ms':>12} {'busbw GB/s':>14}")
    for world in [int(n) for n in args.procs.split(",")]:
        queue = ctx.SimpleQueue()
        if args.hosts and len(args.hosts) < world:
            sys.exit(f"allreduce_torch: --hosts names {len(args.hosts)} hosts for {world} processes")
        port = 29500 if args.hosts else free_port()
        procs = [ctx.Process(target=run, args=(r, world, port, args, queue)) for r in range(world)]
        for pr in procs:
            pr.start()
        deadline = time.time() + 120 + 10 * (args.steps + args.warmup)
        for pr in procs:
            pr.join(max(1, deadline - time.time()))
        failed = [pr for pr in procs if pr.exitcode != 0]
        for pr in procs:
            if pr.is_alive():
                pr.kill()
        if failed:
            sys.exit(f"allreduce_torch: {len(failed)} of the {world} gloo processes failed or hung")
        while not queue.empty():
            r = queue.get()
            if args.json:
                print(json.dumps(r), flush=True)
            else:
                print(f"{r['procs']:<6} {r['mib']:>8g} {r['median_ms']:>12.3f} {r['min_ms']:>12.3f} {r['busbw_gbps']:>14.3f}",
                      flush=True)


if __name__ == "__main__":
    main()
