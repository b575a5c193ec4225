#!/usr/bin/env python3
"""TensorFlow's while loop beside `troupe-bench loop`: the cost of an iteration.

One step runs a tf.while_loop of N iterations in a TF1-style graph with a tf.compat.v1.Session,
Grappler off, 2 inter-op threads (as troupe-bench runs on this machine's two cores), 1 intra-op
thread. Bodies, as bench/loop_bench.cpp's:
  trivial:     i = i + 1 while i < N
  independent: the same counter, and per iteration tanh(A + i), its square and its sum on a
               128x128 float matrix A. Troupe keeps the sum as a sink of the iteration; TensorFlow
               would prune an op nothing needs, so here it is added into a second loop variable
               (one scalar add more per iteration). Iterations can overlap up to
               parallel_iterations.
  dependent:   the counter and a 128x128 float state X carried to the next iteration:
               X = tanh(X + 0.01), and the sum of its square added into a third loop variable.
               The iterations cannot overlap.
Prints the same JSON fields as troupe-bench loop.

Run bench/peers/setup_tf.sh first, then:
  bench/peers/.venv-tf/bin/python bench/peers/loop_tf.py --body trivial --parallel 1 --json
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1


def build(body, parallel):
    n = tf1.placeholder(tf.int32, shape=[], name="n")
    if body == "trivial":
        out = tf1.while_loop(lambda i: tf.less(i, n), lambda i: tf.add(i, 1), [tf.constant(0)],
                             parallel_iterations=parallel)
        return n, out
    a = tf.constant((np.arange(128 * 128) % 7).astype(np.float32).reshape(128, 128) * 0.01)
    if body == "dependent":
        def carry(i, x, acc):
            y = tf.tanh(x + 0.01)
            return tf.add(i, 1), y, acc + tf.reduce_sum(tf.square(y))

        out = tf1.while_loop(lambda i, x, acc: tf.less(i, n), carry, [tf.constant(0), a, tf.constant(0.0)],
                             parallel_iterations=parallel)
        return n, [out[0], out[2]]

    def step(i, acc):
        x = tf.tanh(a + tf.cast(i, tf.float32))
        return tf.add(i, 1), acc + tf.reduce_sum(tf.square(x))

    out = tf1.while_loop(lambda i, acc: tf.less(i, n), step, [tf.constant(0), tf.constant(0.0)],
                         parallel_iterations=parallel)
    return n, out  # both: fetching the counter alone would prune the work away


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--body", choices=["trivial", "independent", "dependent"], default="trivial")
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--iterations", type=int, default=100000)
    ap.add_argument("--steps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    graph = tf.Graph()
    with graph.as_default():
        n, result = build(a.body, a.parallel)
    config = tf1.ConfigProto(inter_op_parallelism_threads=a.threads, intra_op_parallelism_threads=1)
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf1.OptimizerOptions.L0
    with tf1.Session(graph=graph, config=config) as sess:
        feed = {n: a.iterations}
        for _ in range(max(a.warmup, 1)):
            sess.run(result, feed)
        times = []
        for _ in range(a.steps):
            t = time.perf_counter()
            out = sess.run(result, feed)
            times.append((time.perf_counter() - t) * 1e6)
            if a.body != "trivial":
                out = out[0]
            if out != a.iterations:
                sys.exit(f"the loop ran {out} iterations, not {a.iterations}")
    median = statistics.median(times)
    rec = {"system": "tensorflow " + tf.__version__, "benchmark": "loop", "body": a.body, "parallel": a.parallel,
           "devices": 1, "iterations": a.iterations, "steps": a.steps, "threads": a.threads,
           "median_ms": round(median / 1e3, 3), "us_per_iteration": round(median / a.iterations, 3),
           "min_us_per_iteration": round(min(times) / a.iterations, 3)}
    if a.json:
        print(json.dumps(rec, separators=(",", ":")))
    else:
        print(f"tensorflow while loop, {a.body} body, parallel_iterations {a.parallel}: {a.iterations} iterations, "
              f"median {rec['median_ms']} ms/step, {rec['us_per_iteration']} us/iteration")


if __name__ == "__main__":
    main()
