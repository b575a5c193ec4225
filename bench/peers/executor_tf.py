#!/usr/bin/env python3
"""TensorFlow's graph executor on the graphs of `troupe-bench executor`, for side-by-side figures.

The same chain / fanout / random graphs of scalar float adds (bench/executor_bench.cpp), built
in a TF1-style graph and run with a tf.compat.v1.Session, x0 fed each step. Grappler is turned
off (it would fold the chain of "+ 1" into one add), so TensorFlow runs the graph as built, as
Troupe does. Prints the same JSON fields as troupe-bench.

Run bench/peers/setup_tf.sh first, then:
  bench/peers/.venv-tf/bin/python bench/peers/executor_tf.py --shape chain --nodes 10000 --steps 20 --json
"""
import argparse
import json
import os
import random
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import tensorflow as tf  # noqa: E402
from tensorflow.core.protobuf import rewriter_config_pb2  # noqa: E402

tf1 = tf.compat.v1


def build(shape, nodes):
    x0 = tf1.placeholder(tf.float32, shape=[], name="x0")
    fetches, targets = [], []
    if shape == "chain":
        one = tf.constant(1.0, name="one")
        x = x0
        for _ in range(nodes):
            x = tf.add(x, one)
        fetches.append(x)
    elif shape == "fanout":
        outs = [tf.add(x0, tf.constant(float(i))) for i in range(nodes)]
        targets.append(tf.group(*outs, name="join"))
    else:
        lanes = 16
        rng = random.Random(1234)  # not the same stream as the C++ bench: the same structure
        all_nodes = [x0]
        lane = [x0] * lanes
        lane_id = [0] * lanes
        uses = [0] * (1 + nodes)
        for i in range(nodes):
            n = len(all_nodes)
            q = rng.randint(max(0, n - 4 * lanes), n - 1)
            l = i % lanes
            uses[lane_id[l]] += 1
            uses[q] += 1
            lane[l] = tf.add(lane[l], all_nodes[q])
            lane_id[l] = len(all_nodes)
            all_nodes.append(lane[l])
        sinks = [all_nodes[i] for i in range(1, len(all_nodes)) if uses[i] == 0]
        targets.append(tf.group(*sinks, name="join"))
    return x0, fetches, targets


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", choices=["chain", "fanout", "random"], default="chain")
    ap.add_argument("--nodes", type=int, default=10000)
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--threads", type=int, default=os.cpu_count())
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()

    graph = tf.Graph()
    with graph.as_default():
        x0, fetches, targets = build(a.shape, a.nodes)
    config = tf1.ConfigProto(inter_op_parallelism_threads=a.threads,
                             intra_op_parallelism_threads=1)
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf1.OptimizerOptions.L0
    sess = tf1.Session(graph=graph, config=config)
    try:
        feed = {x0: 0.0}
        t0 = time.perf_counter()
        sess.run(fetches + targets, feed)
        setup_ms = (time.perf_counter() - t0) * 1e3
        for _ in range(a.warmup):
            sess.run(fetches + targets, feed)
        times = []
        for _ in range(a.steps):
            t = time.perf_counter()
            out = sess.run(fetches + targets, feed)
            times.append((time.perf_counter() - t) * 1e6)
            if a.shape == "chain" and out[0] != float(a.nodes):
                sys.exit(f"chain computed {out[0]}, expected {a.nodes}")
    finally:
        # The session's end (its executors freed), as Troupe's teardown_ms times its session's.
        t = time.perf_counter()
        sess.close()
        del sess
        teardown_ms = (time.perf_counter() - t) * 1e3
    median = statistics.median(times)
    per_node = median / a.nodes
    rec = {"bench": "executor", "system": "tensorflow " + tf.__version__, "shape": a.shape,
           "nodes": a.nodes, "steps": a.steps, "threads": a.threads,
           "median_step_ms": round(median / 1e3, 3), "min_step_ms": round(min(times) / 1e3, 3),
           "us_per_node": round(per_node, 4), "nodes_per_s": round(1e6 / per_node),
           "setup_ms": round(setup_ms, 1), "teardown_ms": round(teardown_ms, 1)}
    if a.json:
        print(json.dumps(rec, separators=(",", ":")))
    else:
        print(f"tensorflow executor {a.shape}: {a.nodes} nodes, {a.steps} steps: median "
              f"{rec['median_step_ms']} ms/step, {per_node:.3f} us/node")


if __name__ == "__main__":
    main()
