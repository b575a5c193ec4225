#!/usr/bin/env python3
"""Predicts global steps/s of data-parallel training from 2 to 256 workers.

An analytic model, not a simulation and not a measurement. It takes figures measured on this
machine (bench/measure_for_scaling.sh writes them; without --measured, the ones recorded in
docs/performance.md) and predicts three modes of training:

  async      parameter servers, asynchronous: every worker pulls the parameters, computes a
             gradient and pushes it, never waiting for the others; a global step is one update.
  sync       parameter servers, synchronous replicas with backup workers: n workers, b of them
             backups, a step applies the first m = n - b gradients and then all start the next.
  allreduce  no parameter server: gradients summed by a ring all-reduce, applied on every worker.

Inputs: alpha, the one-way latency of a message (half the measured small round trip); beta, the
bandwidth of one link (bytes/s, each direction); c, the compute time of one step of one worker
(batch 64, measured in one process); S, the bytes of the parameters (= of the gradients, float32).

Assumptions (apart from `--cores`, below): every process on a host of its own, every pair of
hosts joined by a full-duplex link with the measured alpha and beta (a non-blocking switch), each
host's NIC its only shared resource.
  * A transfer of B bytes takes alpha + B / beta. An exchange with a task (pull, push, vote) is a
    round trip: 2 alpha plus its bytes. The ps shards are reached in parallel.
  * P ps shards split the parameters evenly (S / P each). Each shard's NIC is shared by all the
    workers pulling from it (outbound) and pushing to it (inbound). The ps's CPU (applying the
    update) costs nothing; a worker computes and communicates in turn, never both at once.
  * async: a closed queueing network solved by exact mean value analysis (MVA; product form, so
    service times taken as exponential): each worker spends c + 4 alpha away from the shards
    (two round trips) and then visits 2P queues (each shard's NIC, in and out), each for
    S / (P beta). One worker alone: c + 4 alpha + 2 S / beta per step; the ceiling, the shards'
    NICs saturated: P beta / S global steps/s.
  * sync: all n workers start a step together and pull at once: 2 alpha + max(S/beta,
    n S/(P beta)). Worker k's compute time is drawn from a shifted exponential with mean c and
    standard deviation cv * c (cv: `step_cv`, assumed 0.1 unless measured), independent across
    workers and steps; the mean of the k-th fastest of n is c(1 - cv) + cv c (H_n - H_(n-k)),
    H the harmonic numbers. The gradients queue at each shard's inbound NIC (S / (P beta) each,
    first come first served, none faster than S / beta); the step has its m gradients at
    max(A_m + S/beta, max over k <= m of A_k + (m-k+1) S/(P beta)), A_k = E[k-th compute] +
    alpha; then a vote round trip (2 alpha). Means stand in for the order statistics' whole
    distributions, and a late worker's overrun into the next step is ignored: both optimistic.
  * allreduce: the bandwidth-optimal ring, 2(N-1) steps each moving S/N bytes per link, all
    links at once: c + 2(N-1)(alpha + S/(N beta)); compute and communication do not overlap
    (Troupe fetches the gradients, then all-reduces them).

`--cores C`: instead, every process on one host of C cores (this machine, for the checks
against 2-4 local processes). The host's CPU is one resource shared by all of them: a step
measured in c on k cores (`<model>_step_cores`, k = `cores` unless given) keeps a share
s = k / C of the host busy for c, so n steps at once take c max(1, n s); loopback moves
beta' = beta C / cores bytes/s in all (the transfer benchmark's sender and receiver kept the
measuring host's `cores` busy), whatever the number of processes; the ps's CPU is free. async:
MVA with one queue, the host (c s + 2 S / beta' per step), and 4 alpha + c (1 - s) away from it
(Seidmann's approximation of several cores as one queue). sync: every worker computes and sends
every step, backups included (their gradients are dropped but still cost CPU): 6 alpha +
c max(1, n s) + 2 n S / beta'. allreduce: c max(1, N s) + 2(N-1)(alpha + S / beta') (each ring
step moves S bytes over all links together). alpha is latency, not CPU, and not shared.

Global steps and examples: async counts one update as a global step (examples/s = steps/s x
batch), sync one step of m gradients (x m x batch), allreduce one all-reduce (x N x batch).
Efficiency = examples/s / (N x batch / c), against N workers each training alone without any
communication; the knee is the smallest N (2..256, every integer) from which on every efficiency
is below 50% ("2": below already with 2 workers). sync takes floor(0.05 n) backups by default.

Usage:
  python3 bench/scaling_model.py [--measured FILE] [--models mlp,alexnet] [--ps 1,4]
                                 [--backup-fraction 0.05] [--cores C] [--json | --summary]
  python3 bench/scaling_model.py --check POINTS.jsonl [--measured FILE] [--cores C]
"""

import argparse
import json
import math
import sys

MIB = 1 << 20

# Figures recorded in docs/performance.md (the sections named), used when no --measured file is
# given: this 2-core VM, loopback.
DEFAULT_MEASURED = {
    "source": "docs/performance.md",
    # "Bytes between two processes", the last table (against the targets): CAF's 64-byte round
    # trip 66.2 and 75.6 us.
    "round_trip_us": 70.9,
    # The same table: a CAF tensor of 1 MiB and 256 MiB, two runs: 2.91, 2.69, 2.88, 3.00 GB/s.
    "bandwidth_gb_per_s": 2.87,
    # "Fashion-MNIST training": Troupe's MLP epochs of 0.59, 0.58, 0.53 s, 937 steps of 64.
    "mlp_step_ms": 0.605,
    # The same table: the CNN's epochs of 23.15, 22.14, 22.41 s.
    "cnn_step_ms": 24.1,
    # "Convnet training steps", the AVX-512 machine: AlexNet at batch 128, 1315.6 ms, halved.
    "alexnet_step_ms": 657.8,
    "cores": 2,
    # Assumed, not measured: the per-step compute time's standard deviation / mean.
    "step_cv": 0.1,
}

# float32 parameters of each model.
MODELS = {
    "mlp": {"parameters": 784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10, "describe": "MLP 784-256-256-10"},
    "cnn": {"parameters": 3274634, "describe": "Fashion-MNIST CNN"},
    "alexnet": {"parameters": 61100840, "describe": "AlexNet (troupe-bench convnet's)"},
}

WORKER_ROWS = [2, 4, 8, 16, 32, 64, 128, 256]
MODES = ["async", "sync", "allreduce"]


class Link:
    """The figures the model runs on, in seconds and bytes.

    The functions below take c, one worker's compute seconds per step. With `cores` set (one
    shared host), a step keeps `share` of the host's cores busy for those c seconds."""

    def __init__(self, alpha, beta, cv, cores=None, measured_cores=None, share=1.0):
        self.alpha = alpha  # one-way latency of a message, s
        self.beta = beta  # bytes/s of one link, or of the whole host with `cores`
        self.cv = cv
        self.cores = cores  # None: separate hosts; else all processes on one host of this many cores
        self.measured_cores = measured_cores
        self.share = share

    def host_beta(self):
        return self.beta * self.cores / self.measured_cores


def harmonic(n, _known=[0.0]):
    while len(_known) <= n:
        _known.append(_known[-1] + 1.0 / len(_known))
    return _known[n]


def expected_order_statistic(k, n, mean, cv):
    """Mean of the k-th smallest of n shifted exponentials with this mean and std cv * mean."""
    if not 1 <= k <= n:
        raise ValueError(f"order statistic {k} of {n}: k must be in 1..n")
    if not 0 <= cv <= 1:
        raise ValueError(f"step_cv {cv}: a shifted exponential needs 0 <= cv <= 1")
    return mean * (1 - cv) + cv * mean * (harmonic(n) - harmonic(n - k))


def mva(customers, think, demands):
    """Exact mean value analysis of a closed network: throughput for 1..customers customers.

    think: time each customer spends at a delay station per cycle; demands: service time of one
    visit to each queueing station (one visit per cycle)."""
    queue = [0.0] * len(demands)
    throughput = []
    for n in range(1, customers + 1):
        residence = [d * (1 + q) for d, q in zip(demands, queue)]
        x = n / (think + sum(residence))
        queue = [x * r for r in residence]
        throughput.append(x)
    return throughput


def async_steps_per_s(workers, ps, size, c, link):
    """Global steps/s (= updates/s) of asynchronous training for 1..workers workers."""
    if link.cores:
        # Seidmann's approximation of the host's cores as one queue: a step's compute is the
        # host's for c * share seconds, the rest of c a delay.
        return mva(workers, 4 * link.alpha + c * (1 - link.share),
                   [c * link.share + 2 * size / link.host_beta()])
    return mva(workers, c + 4 * link.alpha, [size / (ps * link.beta)] * (2 * ps))


def backups_for(workers, fraction):
    return math.floor(fraction * workers)


def shared_compute(workers, c, link):
    """Seconds for `workers` steps computed at once on one host: c, or longer once they need
    more than its cores."""
    return c * max(1.0, workers * link.share)


def sync_step_seconds(workers, backups, ps, size, c, link):
    """Seconds of one synchronous step of `workers` workers, `backups` of them backups."""
    m = workers - backups
    if m < 1:
        raise ValueError(f"sync: {workers} workers with {backups} backups aggregate no gradient")
    a = link.alpha
    if link.cores:
        return 6 * a + shared_compute(workers, c, link) + workers * 2 * size / link.host_beta()
    per_shard = size / (ps * link.beta)  # one worker's share of a shard's NIC, one direction
    pull = 2 * a + max(size / link.beta, workers * per_shard)
    arrive = [expected_order_statistic(k, workers, c, link.cv) + a for k in range(1, m + 1)]
    queued = max(arrive[k - 1] + (m - k + 1) * per_shard for k in range(1, m + 1))
    push = max(arrive[m - 1] + size / link.beta, queued)
    return pull + push + 2 * a


def allreduce_seconds(workers, size, link):
    """Seconds of one ring all-reduce of `size` bytes among `workers` processes."""
    if workers == 1:
        return 0.0
    steps = 2 * (workers - 1)
    if link.cores:
        return steps * (link.alpha + size / link.host_beta())
    return steps * (link.alpha + size / (workers * link.beta))


def allreduce_step_seconds(workers, size, c, link):
    compute = shared_compute(workers, c, link) if link.cores else c
    return compute + allreduce_seconds(workers, size, link)


def predict(mode, workers, ps, backups, size, c, link):
    """(global steps/s, examples per global step / batch) of one configuration."""
    if mode == "async":
        return async_steps_per_s(workers, ps, size, c, link)[-1], 1
    if mode == "sync":
        return 1 / sync_step_seconds(workers, backups, ps, size, c, link), workers - backups
    if mode == "allreduce":
        return 1 / allreduce_step_seconds(workers, size, c, link), workers
    raise ValueError(f"unknown mode '{mode}' (async, sync or allreduce)")


def curve(mode, ps, fraction, size, c, batch, link, top=256):
    """Rows (workers, backups, steps/s, examples/s, efficiency) for 2..top workers."""
    rows = []
    asyncs = async_steps_per_s(top, ps, size, c, link) if mode == "async" else None
    for n in range(2, top + 1):
        backups = backups_for(n, fraction) if mode == "sync" else 0
        if asyncs:
            steps, replicas = asyncs[n - 1], 1
        else:
            steps, replicas = predict(mode, n, ps, backups, size, c, link)
        examples = steps * replicas * batch
        rows.append((n, backups, steps, examples, examples / (n * batch / c)))
    return rows


def knee(rows):
    """The smallest worker count from which on every efficiency is below 50%, or None."""
    found = None
    for n, _, _, _, eff in reversed(rows):
        if eff >= 0.5:
            break
        found = n
    return found


def load_measured(path):
    figures = dict(DEFAULT_MEASURED)
    if path:
        try:
            with open(path) as f:
                figures.update(json.load(f))
        except (OSError, ValueError) as e:
            sys.exit(f"scaling_model: cannot read the measured figures '{path}': {e}")
    for key in ("round_trip_us", "bandwidth_gb_per_s", "cores"):
        if not figures.get(key) or figures[key] <= 0:
            sys.exit(f"scaling_model: measured figure '{key}' in '{path or 'defaults'}' must be positive")
    return figures


def step_seconds(figures, model):
    key = f"{model}_step_ms"
    if not figures.get(key):
        sys.exit(f"scaling_model: no '{key}' among the measured figures ({figures.get('source')})")
    return figures[key] / 1e3


def parameter_bytes(figures, model):
    """float32 bytes of the model's parameters (`<model>_parameters` if measured)."""
    return 4 * figures.get(f"{model}_parameters", MODELS[model]["parameters"])


def make_link(figures, cores, model="mlp"):
    share = min(1.0, figures.get(f"{model}_step_cores", figures["cores"]) / cores) if cores else 1.0
    return Link(alpha=figures["round_trip_us"] / 2e6, beta=figures["bandwidth_gb_per_s"] * 1e9,
                cv=figures.get("step_cv", 0.1), cores=cores, measured_cores=figures["cores"], share=share)


def print_heading(args, figures):
    link = make_link(figures, args.cores)
    where = (f"all processes on one host of {args.cores} cores" if args.cores
             else "every process on a host of its own")
    print(f"MODEL PREDICTIONS, not measurements ({where}): alpha {link.alpha * 1e6:.1f} us, "
          f"beta {link.beta / 1e9:.2f} GB/s, step cv {link.cv}, batch {args.batch}; figures from "
          f"{figures.get('source', args.measured)}")


def print_tables(args, figures):
    print_heading(args, figures)
    out = []
    for model in args.models:
        size = parameter_bytes(figures, model)
        c = step_seconds(figures, model)
        link = make_link(figures, args.cores, model)
        for mode in MODES:
            for ps in (args.ps if mode != "allreduce" else [0]):
                rows = curve(mode, ps, args.backup_fraction, size, c, args.batch, link)
                k = knee(rows)
                title = (f"\n{MODELS[model]['describe']} ({size / MIB:.1f} MiB, step {c * 1e3:.3g} ms), {mode}"
                         + (f", {ps} ps" if ps else "")
                         + (f", backups floor({args.backup_fraction} n)" if mode == "sync" else ""))
                if args.json:
                    out.extend({"model": model, "mode": mode, "ps": ps, "workers": n, "backups": b,
                                "global_steps_per_s": round(s, 4), "examples_per_s": round(e, 1),
                                "efficiency": round(f, 4)} for n, b, s, e, f in rows if n in WORKER_ROWS)
                    out.append({"model": model, "mode": mode, "ps": ps, "knee": k})
                    continue
                print(title)
                print("| workers | backups | global steps/s | examples/s | efficiency |")
                print("|---:|---:|---:|---:|---:|")
                for n, b, s, e, f in rows:
                    if n in WORKER_ROWS:
                        print(f"| {n} | {b} | {s:.4g} | {e:.4g} | {f:.0%} |")
                print(f"knee (efficiency < 50%): {k if k else 'none up to 256'} workers")
    for line in out:
        print(json.dumps(line))


def number(x):
    return f"{x:,.0f}" if x >= 100 else f"{x:.3g}"


def print_summary(args, figures):
    """One table per model: every mode and ps count side by side (docs/performance.md's tables)."""
    print_heading(args, figures)
    columns = [(mode, ps) for mode in MODES for ps in (args.ps if mode != "allreduce" else [0])]
    for model in args.models:
        size = parameter_bytes(figures, model)
        c = step_seconds(figures, model)
        link = make_link(figures, args.cores, model)
        curves = [curve(mode, ps, args.backup_fraction, size, c, args.batch, link) for mode, ps in columns]
        print(f"\n{MODELS[model]['describe']}, {size / MIB:.1f} MiB of float32, step {c * 1e3:.3g} ms: "
              "global steps/s / examples/s (efficiency)")
        print("| workers | " + " | ".join(f"{m}, {p} ps" if p else m for m, p in columns) + " |")
        print("|---:|" + "---:|" * len(columns))
        for n in WORKER_ROWS:
            cells = (f"{number(r[n - 2][2])} / {r[n - 2][3]:,.0f} ({r[n - 2][4]:.0%})" for r in curves)
            print(f"| {n} | " + " | ".join(cells) + " |")
        print("| knee | " + " | ".join(str(knee(r) or "none") for r in curves) + " |")


def check(args, figures):
    """Predicted against measured points, one JSON object a line (local runs on one host)."""
    link = make_link(figures, args.cores or figures["cores"])
    print(f"MODEL against measurement, all processes on one host of {link.cores} cores "
          f"(alpha {link.alpha * 1e6:.1f} us, beta {link.beta / 1e9:.2f} GB/s)")
    print("| point | predicted | measured | relative error |")
    print("|---|---:|---:|---:|")
    try:
        with open(args.check) as f:
            lines = f.read().splitlines()
    except OSError as e:
        sys.exit(f"scaling_model: cannot read the points '{args.check}': {e}")
    for number, text in enumerate(lines, 1):
        if not text.strip().startswith("{"):
            continue
        p = json.loads(text)
        where = f"{args.check}:{number}"
        workers = p.get("workers", p.get("procs"))
        if workers is None:
            sys.exit(f"scaling_model: {where}: a point needs 'workers' (or 'procs')")
        if "median_ms" in p or "allreduce_ms" in p:
            size = p["mib"] * MIB / (2 if p.get("float16") else 1)
            predicted = allreduce_seconds(workers, size, link) * 1e3
            measured = p.get("allreduce_ms", p.get("median_ms"))
            name = f"all-reduce {p['mib']} MiB{' float16' if p.get('float16') else ''}, {workers} procs (ms)"
        elif "global_steps_per_s" in p:
            mode, model = p.get("mode"), p.get("model", "mlp")
            if model not in MODELS:
                sys.exit(f"scaling_model: {where}: unknown model '{model}' ({', '.join(MODELS)})")
            size = parameter_bytes(figures, model) / (2 if p.get("float16") else 1)
            backups = p.get("backup_workers", 0) if mode == "sync" else 0
            predicted, _ = predict(mode, workers, max(1, p.get("ps", 1)), backups, size,
                                   step_seconds(figures, model), make_link(figures, link.cores, model))
            measured = p["global_steps_per_s"]
            name = (f"{model} {mode}, {p.get('ps', 1) if mode != 'allreduce' else 0} ps + {workers} workers"
                    + (f", {backups} backup" if backups else "") + " (global steps/s)")
        else:
            sys.exit(f"scaling_model: {where}: neither 'global_steps_per_s' nor 'median_ms'/'allreduce_ms'")
        print(f"| {name} | {predicted:.4g} | {measured:.4g} | {(predicted - measured) / measured:+.0%} |")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--measured", help="JSON of measured figures (bench/measure_for_scaling.sh)")
    parser.add_argument("--models", default="mlp,alexnet", help=f"comma-separated: {', '.join(MODELS)}")
    parser.add_argument("--ps", default="1,4", help="ps shard counts, comma-separated")
    parser.add_argument("--backup-fraction", type=float, default=0.05,
                        help="sync: floor(fraction x workers) backup workers")
    parser.add_argument("--batch", type=int, default=64, help="examples per worker per step")
    parser.add_argument("--cores", type=int, help="all processes on one host of this many cores")
    parser.add_argument("--check", help="JSON lines of measured points: print predicted against measured")
    parser.add_argument("--json", action="store_true", help="one JSON line per table row")
    parser.add_argument("--summary", action="store_true", help="one table per model, every mode side by side")
    args = parser.parse_args(argv)
    figures = load_measured(args.measured)
    if args.cores is not None and args.cores < 1:
        parser.error(f"--cores {args.cores}: must be at least 1")
    if args.check:
        return check(args, figures)
    args.models = args.models.split(",")
    for m in args.models:
        if m not in MODELS:
            parser.error(f"--models: unknown model '{m}' ({', '.join(MODELS)})")
    args.ps = [int(p) for p in args.ps.split(",")]
    if any(p < 1 for p in args.ps):
        parser.error("--ps: every shard count must be at least 1")
    if not 0 <= args.backup_fraction < 1:
        parser.error(f"--backup-fraction {args.backup_fraction}: must be in [0, 1)")
    if args.summary:
        return print_summary(args, figures)
    print_tables(args, figures)


if __name__ == "__main__":
    main()
