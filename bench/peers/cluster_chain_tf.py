#!/usr/bin/env python3
"""TensorFlow's gRPC runtime on the two-process graph of `troupe-bench cluster`, for side-by-side figures.

Two TensorFlow servers (tf.compat.v1.train.Server) on loopback, one per process: worker:0 in
this process (its master runs the session), worker:1 in a child process started from this
script. The graph is a chain of `--layers` matmuls on [size, size] float32: x is fed on
worker:0, layer i runs on /job:worker/task:(i % 2) with a constant weight scaled ~1/size (so the
values stay near 1), and the reduce_sum of the last output is fetched on worker:0. Every edge
between two tasks carries one [size, size] tensor (1 MiB at size 512): with an even number of
layers each layer's output crosses once, `layers` crossings a step. Grappler and the classic
graph optimizer are off, as in executor_tf.py, so the graph runs as built. Each process uses
`--threads` intra-op and inter-op threads. Prints the median and mean step time; with --json
one line with the same keys as `troupe-bench cluster --json` ("system": "tensorflow-grpc").

Run bench/peers/setup_tf.sh first, then:
  bench/peers/.venv-tf/bin/python bench/peers/cluster_chain_tf.py --size 512 --layers 8 \
      --steps 200 --warmup 20 --threads 1 --json
bench/peers/compare_cluster.sh runs it beside Troupe's side.
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from peer_common import free_loopback_ports  # noqa: E402

tf1 = tf.compat.v1

START_TIMEOUT_S = 60.0


def session_config(threads):
    config = tf1.ConfigProto(inter_op_parallelism_threads=threads,
                             intra_op_parallelism_threads=threads)
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf1.OptimizerOptions.L0
    # Bounds every Session.run, so a lost worker fails the step instead of hanging it.
    config.operation_timeout_in_ms = int(START_TIMEOUT_S * 1000)
    return config


def serve(task, spec, threads, parent_pid):
    """The child: runs worker:`task` until killed, or until its parent is gone."""
    server = tf1.train.Server(tf.train.ClusterSpec(spec), job_name="worker", task_index=task,
                              config=session_config(threads), start=True)

    def exit_when_orphaned():
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(0)

    threading.Thread(target=exit_when_orphaned, daemon=True).start()
    server.join()


def wait_until_listening(child, port, log_path):
    """Returns once the child's server accepts connections on `port`; raises after START_TIMEOUT_S."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if child.poll() is not None:
            raise RuntimeError(f"worker:1 (127.0.0.1:{port}) exited with status {child.returncode} "
                               f"before listening:\n{tail(log_path)}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(f"worker:1 (127.0.0.1:{port}) did not listen within {START_TIMEOUT_S:.0f} s:\n"
                       f"{tail(log_path)}")


def tail(path, lines=20):
    with open(path, errors="replace") as f:
        return "".join(f.readlines()[-lines:])


def device(task):
    return f"/job:worker/task:{task}/device:CPU:0"


def build(size, layers, weights):
    """The chain; returns (x, the fetched sum, the number of [size, size] edges between tasks)."""
    with tf.device(device(0)):
        x = tf1.placeholder(tf.float32, shape=[size, size], name="x")
    h, h_task, crossings = x, 0, 0
    for i, w in enumerate(weights):
        task = i % 2
        crossings += task != h_task
        with tf.device(device(task)):
            h = tf.matmul(h, tf.constant(w, name=f"w{i}"), name=f"layer{i}")
        h_task = task
    with tf.device(device(0)):
        crossings += h_task != 0
        total = tf.reduce_sum(h, name="sum")
    return x, total, crossings


def cross_task_receives(partition_graphs):
    """The _Recv nodes whose sender is on the other task: what crosses between the processes."""
    def task(name):
        return next(part for part in name.split("/") if part.startswith("task:"))

    return sum(1 for g in partition_graphs for n in g.node
               if n.op == "_Recv"
               and task(n.attr["send_device"].s.decode()) != task(n.attr["recv_device"].s.decode()))


def reference_sum(x, weights):
    h = x.astype(np.float64)
    for w in weights:
        h = h @ w.astype(np.float64)
    return float(h.sum())


def run(a):
    rng = np.random.default_rng(1234)
    # Uniform in [0, 2/size): each output element averages to its input row's mean, so ~1.
    weights = [rng.uniform(0.0, 2.0 / a.size, size=(a.size, a.size)).astype(np.float32)
               for _ in range(a.layers)]
    x_value = np.ones((a.size, a.size), dtype=np.float32)

    ports = free_loopback_ports(2)
    spec = {"worker": [f"127.0.0.1:{p}" for p in ports]}
    log = tempfile.NamedTemporaryFile(prefix="cluster_chain_tf_worker1_", suffix=".log", delete=False)
    child = None
    try:
        t0 = time.perf_counter()
        child = subprocess.Popen([sys.executable, os.path.abspath(__file__), "--serve", "1",
                                  "--spec", json.dumps(spec), "--threads", str(a.threads),
                                  "--parent", str(os.getpid())],
                                 stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT)
        wait_until_listening(child, ports[1], log.name)
        child_up_ms = (time.perf_counter() - t0) * 1e3

        t0 = time.perf_counter()
        server = tf1.train.Server(tf.train.ClusterSpec(spec), job_name="worker", task_index=0,
                                  config=session_config(a.threads), start=True)
        graph = tf.Graph()
        with graph.as_default():
            x, total, crossings = build(a.size, a.layers, weights)
        with tf1.Session(server.target, graph=graph, config=session_config(a.threads)) as sess:
            feed = {x: x_value}
            meta = tf1.RunMetadata()
            got = sess.run(total, feed, options=tf1.RunOptions(output_partition_graphs=True),
                           run_metadata=meta)
            first_step_ms = (time.perf_counter() - t0) * 1e3
            received = cross_task_receives(meta.partition_graphs)
            if received != crossings:
                raise RuntimeError(f"TensorFlow's partitions receive {received} tensors across "
                                   f"tasks a step, the chain as built expects {crossings}")
            want = reference_sum(x_value, weights)
            if not abs(got - want) <= 1e-3 * abs(want):
                raise RuntimeError(f"the chain summed to {got}, the float64 reference to {want}")
            for _ in range(a.warmup):
                sess.run(total, feed)
            times = []
            for _ in range(a.steps):
                t = time.perf_counter()
                sess.run(total, feed)
                times.append((time.perf_counter() - t) * 1e3)
    finally:
        if child is not None and child.poll() is None:
            child.kill()
            try:
                child.wait(timeout=10)
            except subprocess.TimeoutExpired:
                print(f"worker:1 (pid {child.pid}) did not exit after SIGKILL", file=sys.stderr)
        log.close()
        os.unlink(log.name)

    rec = {"system": "tensorflow-grpc", "size": a.size, "layers": a.layers,
           "crossings_per_step": crossings, "bytes_per_crossing": a.size * a.size * 4,
           "step_ms_median": round(statistics.median(times), 3),
           "step_ms_mean": round(statistics.mean(times), 3), "steps": a.steps,
           "step_ms_min": round(min(times), 3), "threads": a.threads,
           "version": tf.__version__, "worker1_up_ms": round(child_up_ms, 1),
           "first_step_ms": round(first_step_ms, 1)}
    if a.json:
        print(json.dumps(rec, separators=(",", ":")), flush=True)
    else:
        print(f"tensorflow {tf.__version__} gRPC, 2 tasks: {a.layers} layers of {a.size}x{a.size} "
              f"matmul, {crossings} crossings of {rec['bytes_per_crossing']} bytes a step, "
              f"{a.steps} steps: step_ms median {rec['step_ms_median']}, mean {rec['step_ms_mean']} "
              f"(worker:1 up in {rec['worker1_up_ms']} ms, first step {rec['first_step_ms']} ms)",
              flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    ap.add_argument("--parent", type=int, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.serve is not None:
        serve(a.serve, json.loads(a.spec), a.threads, a.parent)
        return
    if a.size < 1 or a.layers < 1 or a.steps < 1 or a.warmup < 0 or a.threads < 1:
        sys.exit("--size, --layers, --steps and --threads must be positive, --warmup not negative")
    status = 0
    try:
        run(a)
    except (RuntimeError, tf.errors.OpError) as e:
        print(f"cluster_chain_tf: {e}", file=sys.stderr)
        status = 1
    # TensorFlow's in-process server has no stop; leave without waiting on its threads.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


if __name__ == "__main__":
    main()
