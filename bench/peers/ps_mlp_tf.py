#!/usr/bin/env python3
"""TensorFlow's own parameter-server training of the Fashion-MNIST MLP, beside Troupe's.

The TF 1.x recipe in TF 2.x's compat.v1 graph mode, between-graph replication: one
tf.compat.v1.train.Server per task (ps:0..P-1 and worker:0..W-1), each in an OS process of its
own that this script starts on free 127.0.0.1 ports (`ps_mlp_tf.py --task worker:1 ...`, so
`ps` shows which task a process is). Every worker builds the graph under
tf.compat.v1.train.replica_device_setter (the variables, their momentum slots and global_step on
the ps tasks, the rest on the worker) and trains in a MonitoredTrainingSession; worker:0 is the
chief (it initialises the variables, and in sync mode runs SyncReplicasOptimizer's queue runner).

Model and recipe as Troupe's `troupe-fashion-mnist --model mlp`: MLP 784-256-256-10 (relu,
Glorot-uniform weights, zero biases), softmax cross-entropy, batch 64 per worker, momentum SGD
(lr 0.01, momentum 0.9). Input: worker k reads its shard of the shuffled training set
(examples k, k+W, ... of one permutation shared by all), reshuffled every pass, and feeds each
batch through feed_dict as a typical TF1 program does (no tf.data pipeline).

  --mode async: every worker applies its own gradients on the ps (no waiting).
  --mode sync:  tf.compat.v1.train.SyncReplicasOptimizer with replicas_to_aggregate =
                workers - backup_workers and total_num_replicas = workers.
Training stops when global_step >= --steps. --delay-ms D makes one worker (--delay-worker K,
default the last) sleep D ms before each of its steps: a straggler.

The chief times from the first global step >= --warmup-steps to the end, then evaluates on the
10,000 test images and reports (one JSON line with --json): global_steps_per_s, examples_per_s
(global steps/s x batch x gradients aggregated per step: the workers aggregated in sync, 1 in
async) and test_accuracy. TensorFlow does not count the stale gradients its accumulators drop
(ConditionalAccumulator drops them silently), so dropped_gradients is null; gradients_pushed
lists how many gradients each worker pushed (for sync, applied steps x aggregated is at most what
was pushed; the rest were dropped as stale or still pending at the end).

Start-up: the ps tasks first, then the chief; the other workers once the chief has initialised
(a non-chief MonitoredTrainingSession that finds the model uninitialised waits 30 s before
looking again), and every worker starts training once all are ready. Every wait is bounded, a
task that exits early fails the run naming it (exit 1), and every process is stopped by its pid
at the end, on error and on Ctrl-C / SIGTERM (the children also leave when this script's pipe
to them closes).

Run bench/peers/setup_tf.sh first, then e.g.
  bench/peers/.venv-tf/bin/python bench/peers/ps_mlp_tf.py --mode async --ps 1 --workers 2 \
      --steps 1000 --json
  bench/peers/.venv-tf/bin/python bench/peers/ps_mlp_tf.py --mode sync --ps 1 --workers 3 \
      --backup-workers 1 --steps 1000 --json
bench/peers/compare_ps.sh runs it beside Troupe's side.
"""
import argparse
import collections
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time

from peer_common import find_idx, free_loopback_ports, read_idx

DATA = "/usr/share/datasets/fashion-mnist"
MARK = "@ps_mlp_tf "  # a line a child sends to the launcher: MARK + JSON
START_TIMEOUT_S = 120.0  # a task's start-up, and the chief's readiness
STOP_GRACE_S = 10.0      # a task's own exit once asked to stop


# ---------------------------------------------------------------------------------------------
# The launcher: starts every task, watches them, prints the chief's report.

class TaskFailed(RuntimeError):
    pass


class Task:
    """One child process: its task name, its messages, and the tail of its log."""

    def __init__(self, name, argv, events, verbose):
        self.name = name
        self.tail = collections.deque(maxlen=40)
        self.stats = None
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, bufsize=1,
                                     start_new_session=True)  # Ctrl-C reaches the launcher only
        self.reader = threading.Thread(target=self._read, args=(events, verbose), daemon=True)
        self.reader.start()

    def _read(self, events, verbose):
        for line in self.proc.stdout:
            line = line.rstrip("\n")
            if line.startswith(MARK):
                events.put((self, json.loads(line[len(MARK):])))
            else:
                self.tail.append(line)
                if verbose:
                    print(f"[{self.name}] {line}", file=sys.stderr, flush=True)
        events.put((self, {"event": "eof"}))

    def send(self, text):
        try:
            self.proc.stdin.write(text)
            self.proc.stdin.flush()
        except (BrokenPipeError, ValueError):
            pass

    def ask_to_stop(self):
        """Closes its stdin: a worker reports its counts and leaves, a ps task leaves."""
        try:
            self.proc.stdin.close()
        except (BrokenPipeError, ValueError):
            pass

    def log(self):
        return "\n".join(f"    {l}" for l in self.tail) or "    (nothing)"

    def describe_exit(self):
        rc = self.proc.returncode
        how = ("closed its output but is still running" if rc is None else
               f"was killed by signal {-rc}" if rc < 0 else f"exited with status {rc}")
        return f"{self.name} (pid {self.proc.pid}) {how}; its last lines:\n{self.log()}"


def child_argv(a, task, spec):
    argv = [sys.executable, os.path.abspath(__file__), "--task", task, "--spec", json.dumps(spec),
            "--mode", a.mode, "--ps", str(a.ps), "--workers", str(a.workers),
            "--backup-workers", str(a.backup_workers), "--steps", str(a.steps),
            "--warmup-steps", str(a.warmup_steps), "--batch", str(a.batch), "--lr", str(a.lr),
            "--momentum", str(a.momentum), "--delay-ms", str(a.delay_ms),
            "--delay-worker", str(a.delay_worker), "--threads", str(a.threads),
            "--seed", str(a.seed), "--data", a.data, "--op-timeout-s", str(a.op_timeout_s)]
    return argv


def launch(a):
    ports = free_loopback_ports(a.ps + a.workers)
    spec = {"ps": [f"127.0.0.1:{p}" for p in ports[:a.ps]],
            "worker": [f"127.0.0.1:{p}" for p in ports[a.ps:]]}
    events = queue.Queue()
    tasks = {}
    deadline = time.monotonic() + a.timeout_s

    def start(name):
        tasks[name] = Task(name, child_argv(a, name, spec), events, a.verbose)

    def next_event(until, waiting_for):
        """The next message from a task; a task that ends unasked fails the run."""
        while True:
            left = min(until, deadline) - time.monotonic()
            if left <= 0:
                what = "the run's --timeout-s" if deadline <= until else "its bound"
                raise TaskFailed(f"no {waiting_for} within {what}; still running: "
                                 + ", ".join(f"{t.name} (pid {t.proc.pid})" for t in tasks.values()
                                             if t.proc.poll() is None))
            try:
                task, msg = events.get(timeout=min(left, 1.0))
            except queue.Empty:
                continue
            if msg["event"] == "eof":
                if task.stats is not None and not task.name.startswith("ps:"):
                    continue  # a worker that finished on its own
                try:
                    task.proc.wait(timeout=STOP_GRACE_S)
                except subprocess.TimeoutExpired:
                    pass
                raise TaskFailed(task.describe_exit())
            if msg["event"] == "progress":
                print(f"[{task.name}] global step {msg['global_step']}, "
                      f"{msg['examples_per_s']:.0f} examples/s, loss {msg['loss']:.4f}",
                      file=sys.stderr, flush=True)
                continue
            return task, msg

    def wait_ready(names):
        pending = set(names)
        until = time.monotonic() + START_TIMEOUT_S
        while pending:
            task, msg = next_event(until, "ready message from " + ", ".join(sorted(pending)))
            if msg["event"] == "ready":
                pending.discard(task.name)
            elif msg["event"] == "stats":
                task.stats = msg

    try:
        for i in range(a.ps):
            start(f"ps:{i}")
        start("worker:0")
        wait_ready([f"ps:{i}" for i in range(a.ps)] + ["worker:0"])
        others = [f"worker:{i}" for i in range(1, a.workers)]
        for name in others:
            start(name)
        wait_ready(others)
        for i in range(a.workers):
            tasks[f"worker:{i}"].send("go\n")
        report = None
        while report is None:
            task, msg = next_event(deadline, "report from the chief (worker:0)")
            if msg["event"] == "stats":
                task.stats = msg
            elif msg["event"] == "report":
                report = msg
                task.stats = msg  # its exit from now on is expected
        # The others may be blocked (sync: waiting for a token no step will release): ask them.
        for name in others:
            tasks[name].ask_to_stop()
        until = time.monotonic() + STOP_GRACE_S
        while any(tasks[n].stats is None for n in others):
            task, msg = next_event(until, "final counts from " + ", ".join(
                n for n in others if tasks[n].stats is None))
            if msg["event"] == "stats":
                task.stats = msg
        pushed = [report["gradients_pushed"]] + [tasks[n].stats["gradients_pushed"] for n in others]
        del report["event"]
        report["gradients_pushed"] = pushed
        return report
    finally:
        stop_all(tasks.values())


def stop_all(tasks):
    """Asks every task to leave, then kills what is still running after STOP_GRACE_S."""
    tasks = list(tasks)
    for t in tasks:
        t.ask_to_stop()
    until = time.monotonic() + STOP_GRACE_S
    for t in tasks:
        try:
            t.proc.wait(timeout=max(0.0, until - time.monotonic()))
        except subprocess.TimeoutExpired:
            t.proc.kill()
            try:
                t.proc.wait(timeout=STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                print(f"ps_mlp_tf: {t.name} (pid {t.proc.pid}) did not exit after SIGKILL",
                      file=sys.stderr)


# ---------------------------------------------------------------------------------------------
# A task: ps:K serves its variables; worker:K trains.

def say(**msg):
    print(MARK + json.dumps(msg, separators=(",", ":")), flush=True)


def load(folder, stem_images, stem_labels):
    import numpy as np
    x = read_idx(find_idx(folder, stem_images)).reshape(-1, 784).astype(np.float32) / 255.0
    y = read_idx(find_idx(folder, stem_labels)).astype(np.int64)
    return x, y


def batches(x, y, a, index):
    """This worker's shard of the shuffled training set, reshuffled every pass, in batches."""
    import numpy as np
    order = np.random.default_rng(a.seed).permutation(len(x))
    shard = order[index::a.workers]
    rng = np.random.default_rng(a.seed + 1 + index)
    while True:
        mine = rng.permutation(shard)
        for i in range(0, len(mine) - a.batch + 1, a.batch):
            idx = mine[i:i + a.batch]
            yield x[idx], y[idx]


def watch_stdin(go, on_eof):
    """The launcher's pipe: "go" starts training; its end means stop (or that the launcher died)."""
    def run():
        for line in sys.stdin:
            if line.strip() == "go":
                go.set()
        on_eof()
    threading.Thread(target=run, daemon=True).start()


def leave(status):
    # TensorFlow's in-process server has no stop; leave without waiting on its threads.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


def session_config(a, job, index):
    import tensorflow as tf
    tf1 = tf.compat.v1
    config = tf1.ConfigProto(inter_op_parallelism_threads=a.threads,
                             intra_op_parallelism_threads=a.threads)
    if job == "worker":
        # Between-graph replication: a worker's session talks to the ps tasks and itself only.
        config.device_filters[:] = ["/job:ps", f"/job:worker/task:{index}"]
    # Bounds every blocking op, so a lost task fails the step instead of hanging it.
    config.operation_timeout_in_ms = int(a.op_timeout_s * 1000)
    return config


def serve_ps(a, spec, index):
    import tensorflow as tf
    watch_stdin(threading.Event(), lambda: leave(0))
    tf.compat.v1.train.Server(tf.train.ClusterSpec(spec), job_name="ps", task_index=index,
                              config=session_config(a, "ps", index), start=True)
    say(event="ready")
    while True:
        time.sleep(3600)


def mlp(x):
    import tensorflow as tf
    tf1 = tf.compat.v1
    h = x
    sizes = [784, 256, 256, 10]
    for i in range(3):
        w = tf1.get_variable(f"dense{i}/kernel", [sizes[i], sizes[i + 1]],
                             initializer=tf1.glorot_uniform_initializer())
        b = tf1.get_variable(f"dense{i}/bias", [sizes[i + 1]], initializer=tf1.zeros_initializer())
        h = tf.matmul(h, w) + b
        if i < 2:
            h = tf.nn.relu(h)
    return h


def train(a, spec, index):
    import numpy as np
    import tensorflow as tf
    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    chief = index == 0
    replicas = a.workers - a.backup_workers if a.mode == "sync" else 1
    pushed = [0]
    go = threading.Event()

    def stop():
        if not chief:
            say(event="stats", gradients_pushed=pushed[0])
        leave(0)

    watch_stdin(go, stop)
    train_x, train_y = load(a.data, "train-images-idx3-ubyte", "train-labels-idx1-ubyte")
    test_x, test_y = load(a.data, "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte") if chief else (None, None)

    cluster = tf.train.ClusterSpec(spec)
    server = tf1.train.Server(cluster, job_name="worker", task_index=index,
                              config=session_config(a, "worker", index), start=True)
    tf1.set_random_seed(a.seed)
    with tf1.device(tf1.train.replica_device_setter(worker_device=f"/job:worker/task:{index}",
                                                   cluster=cluster)):
        global_step = tf1.train.get_or_create_global_step()
        x = tf1.placeholder(tf.float32, [None, 784], name="images")
        y = tf1.placeholder(tf.int64, [None], name="labels")
        logits = mlp(x)
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        correct = tf.reduce_sum(tf.cast(tf.equal(tf.argmax(logits, 1), y), tf.int64))
        opt = tf1.train.MomentumOptimizer(a.lr, a.momentum)
        hooks = []
        if a.mode == "sync":
            opt = tf1.train.SyncReplicasOptimizer(opt, replicas_to_aggregate=replicas,
                                                  total_num_replicas=a.workers)
            hooks.append(opt.make_session_run_hook(chief))
        train_op = opt.minimize(loss, global_step=global_step)

    sess = tf1.train.MonitoredTrainingSession(
        master=server.target, is_chief=chief, hooks=hooks, config=session_config(a, "worker", index),
        checkpoint_dir=None, save_checkpoint_secs=None, save_summaries_steps=None,
        save_summaries_secs=None, log_step_count_steps=0, stop_grace_period_secs=5,
        max_wait_secs=START_TIMEOUT_S)
    say(event="ready")
    if not go.wait(START_TIMEOUT_S):
        raise RuntimeError(f"worker:{index}: no go from the launcher within {START_TIMEOUT_S:.0f} s")

    straggler = a.delay_ms > 0 and index == (a.delay_worker if a.delay_worker >= 0 else a.workers - 1)
    feed = batches(train_x, train_y, a, index)
    loss_avg = None
    timed_from = None
    first = None
    last_report, last_step = time.perf_counter(), 0
    step = 0
    while step < a.steps:
        if straggler:
            time.sleep(a.delay_ms / 1000.0)
        bx, by = next(feed)
        _, l, step = sess.run([train_op, loss, global_step], feed_dict={x: bx, y: by})
        pushed[0] += 1
        if not np.isfinite(l):
            raise RuntimeError(f"worker:{index}: the loss diverged ({l}) at global step {step}")
        loss_avg = l if loss_avg is None else 0.95 * loss_avg + 0.05 * l
        if not chief:
            continue
        if first is None:
            first = step
        if timed_from is None and step - first >= a.warmup_steps:
            timed_from, timed_from_step = time.perf_counter(), step
        now = time.perf_counter()
        if now - last_report >= 2.0:
            say(event="progress", global_step=int(step), loss=float(loss_avg),
                examples_per_s=(step - last_step) * a.batch * replicas / (now - last_report))
            last_report, last_step = now, step
    if not chief:
        stop()
    seconds = time.perf_counter() - timed_from if timed_from is not None else 0.0
    timed_steps = step - timed_from_step if timed_from is not None else 0
    right = sum(int(sess.run(correct, feed_dict={x: test_x[i:i + 1000], y: test_y[i:i + 1000]}))
                for i in range(0, len(test_x), 1000))
    steps_per_s = timed_steps / seconds if seconds > 0 else 0.0
    say(event="report", system="tensorflow", version=tf.__version__, mode=a.mode, model="mlp",
        workers=a.workers, ps=a.ps, backup_workers=a.backup_workers, batch=a.batch,
        replicas_per_step=replicas, global_steps=int(step), timed_steps=int(timed_steps),
        seconds=round(seconds, 3), global_steps_per_s=round(steps_per_s, 2),
        examples_per_s=round(steps_per_s * a.batch * replicas, 1), train_loss=float(loss_avg),
        test_accuracy=right / len(test_x), dropped_gradients=None, gradients_pushed=pushed[0],
        threads=a.threads, input="feed_dict", straggler=(
            {"worker": a.delay_worker if a.delay_worker >= 0 else a.workers - 1,
             "delay_ms": a.delay_ms} if a.delay_ms > 0 else None))
    # Not sess.close(): in sync mode the queue runner may wait on gradients no worker will push.
    leave(0)


def run_task(a):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    job, _, index = a.task.partition(":")
    spec = json.loads(a.spec)
    try:
        if job == "ps":
            serve_ps(a, spec, int(index))
        else:
            train(a, spec, int(index))
    except Exception as e:  # noqa: BLE001: any failure ends the task with its reason
        print(f"{a.task}: {type(e).__name__}: {e}", flush=True)
        leave(1)


# ---------------------------------------------------------------------------------------------

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--mode", choices=["async", "sync"], default="async")
    ap.add_argument("--ps", type=int, default=1)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--backup-workers", type=int, default=0,
                    help="sync: workers whose gradients a step does not wait for")
    ap.add_argument("--steps", type=int, default=1000, help="train until global_step >= this")
    ap.add_argument("--warmup-steps", type=int, default=20, help="global steps before the timing starts")
    ap.add_argument("--batch", type=int, default=64, help="examples per worker and step")
    ap.add_argument("--lr", type=float, default=0.01)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--delay-ms", type=int, default=0, help="the straggler sleeps this long before each step")
    ap.add_argument("--delay-worker", type=int, default=-1, help="the straggler's index (-1: the last worker)")
    ap.add_argument("--threads", type=int, default=0, help="TF intra- and inter-op threads per process (0: TF's default)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--data", default=DATA, help="folder with the Fashion-MNIST IDX files (.gz or not)")
    ap.add_argument("--timeout-s", type=float, default=900.0, help="bound on the whole run")
    ap.add_argument("--op-timeout-s", type=float, default=120.0, help="bound on each blocking TF op")
    ap.add_argument("--verbose", action="store_true", help="show every task's log lines on stderr")
    ap.add_argument("--json", action="store_true")
    ap.add_argument("--task", help=argparse.SUPPRESS)
    ap.add_argument("--spec", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.task is not None:
        run_task(a)
        return
    problems = []
    if a.ps < 1 or a.workers < 1:
        problems.append("--ps and --workers must be at least 1")
    if a.mode == "sync" and not 0 <= a.backup_workers < a.workers:
        problems.append("--backup-workers must be at least 0 and less than --workers")
    if a.mode == "async" and a.backup_workers != 0:
        problems.append("--backup-workers is for --mode sync")
    if a.steps <= a.warmup_steps or a.warmup_steps < 0:
        problems.append("--steps must be larger than --warmup-steps (not negative)")
    if a.batch < 1 or a.delay_ms < 0 or a.threads < 0 or not -1 <= a.delay_worker < a.workers:
        problems.append("--batch must be positive, --delay-ms and --threads not negative, "
                        "--delay-worker a worker's index or -1")
    if not os.path.isdir(a.data):
        problems.append(f"--data {a.data} is not a folder")
    if problems:
        ap.error("; ".join(problems))

    def terminate(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGINT, terminate)  # also where a shell started us with SIGINT ignored
    try:
        r = launch(a)
    except TaskFailed as e:
        sys.exit(f"ps_mlp_tf: the run failed: {e}")
    except KeyboardInterrupt:
        sys.exit("ps_mlp_tf: interrupted; every task stopped")
    if a.json:
        print(json.dumps(r, separators=(",", ":")), flush=True)
    else:
        extra = (f", gradients pushed per worker {r['gradients_pushed']} (TensorFlow does not count "
                 f"the stale ones it drops)" if a.mode == "sync" else "")
        print(f"tensorflow {r['version']} {a.mode} on {a.ps} ps + {a.workers} workers: "
              f"{r['global_steps']} global steps, {r['global_steps_per_s']} global steps/s "
              f"({r['examples_per_s']:.0f} examples/s), test accuracy {r['test_accuracy']:.4f}"
              f"{extra}; input fed through feed_dict", flush=True)


if __name__ == "__main__":
    main()
