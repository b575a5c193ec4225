// troupe-fashion-mnist as one worker of a cluster job (--cluster SPEC --task worker:K), in one
// of three modes (docs/cluster.md, "Training on a cluster"):
//   async      between-graph replication over parameter servers: every worker builds the
//              graph with replica_device_setter (variables and their optimizer slots on the ps
//              tasks), reads its shard of the input, and applies its gradients on the ps without
//              waiting for the others; the global step counts the updates applied.
//   sync       the same graph with SyncReplicasOptimizer (ops/state/sync_replicas.hpp): each
//              global step applies the average of the first workers - backup_workers gradients
//              once; later ones are dropped and counted.
//   allreduce  no parameter server: every worker holds the variables, the gradients are summed
//              over the workers by ring all-reduce (actors/cluster/allreduce.hpp), averaged, and
//              applied locally, so every worker keeps bitwise the same weights.
// The process hosts its task's cluster member (what troupe-node runs) and a session whose target
// is that member. worker:0 is the chief: it initialises the variables (the others wait for it),
// prints the job's progress ("progress: ..." lines, which troupe-launch shows as one display),
// saves checkpoints, evaluates at the end and prints the summary (--json: one JSON line).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <future>
#include <optional>
#include <string>
#include <thread>

#include "actors/cluster/allreduce.hpp"
#include "actors/cluster/member.hpp"
#include "actors/saver.hpp"
#include "actors/session.hpp"
#include "actors/supervisor.hpp"
#include "apps/fashion_mnist.hpp"
#include "apps/run_log.hpp"
#include "core/dtype_visit.hpp"
#include "core/fingerprint.hpp"
#include "devices/cpu_threads.hpp"
#include "graph/gradients.hpp"
#include "ops/all.hpp"
#include "ops/data/batch_reader.hpp"
#include "ops/data/idx.hpp"
#include "ops/data/pipeline.hpp"
#include "ops/state/replica_device_setter.hpp"

namespace troupe::app {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kTrainSize = 60000, kTestSize = 10000, kTestBatch = 1000;
// How long a worker waits for the chief to initialise the variables (the chief may still be
// starting: its process, its member, its session's connections).
constexpr auto kInitTimeout = std::chrono::seconds(120);
// A step's bound: a sync step waits for the other replicas, so it is as slow as the m-th
// fastest of them; beyond this the job has lost too many workers to go on.
constexpr auto kStepTimeout = std::chrono::seconds(120);
// How long a lost ps task may take to come back before the job gives up (with --checkpoint-dir).

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The job as this worker sees it.
struct Job {
  ClusterSpec spec;
  TaskId me;
  int workers = 0;
  int ps = 0;
  int replicas_per_step = 1;  // gradients averaged into one global step
  int64_t steps = 0;          // global steps to train
  bool chief = false;
};

Job job_of(const Args& a) {
  Job job;
  job.spec = a.where.spec();
  job.me = a.where.task();
  if (job.me.job != "worker")
    fail(ErrorCode::invalid_argument, "task {}: troupe-fashion-mnist runs worker tasks (the ps tasks run troupe-node)",
         job.me.to_string());
  const auto& jobs = job.spec.jobs();
  job.workers = int(jobs.at("worker").size());
  job.ps = jobs.count("ps") ? int(jobs.at("ps").size()) : 0;
  if (a.mode != "allreduce" && job.ps == 0)
    fail(ErrorCode::invalid_argument, "--mode {} needs parameter servers, and the spec of {} has no ps job "
         "(troupe-launch --ps 1)", a.mode, a.where.source());
  if (a.mode == "sync") {
    job.replicas_per_step = job.workers - a.backup_workers;
    if (job.replicas_per_step < 1)
      fail(ErrorCode::invalid_argument, "--backup-workers {} leaves no worker to aggregate ({} workers)",
           a.backup_workers, job.workers);
  } else if (a.mode == "allreduce") {
    job.replicas_per_step = job.workers;
  }
  job.chief = job.me.index == 0;
  job.steps = a.steps > 0 ? a.steps
                          : (int64_t(a.epochs) * kTrainSize + int64_t(a.batch) * job.replicas_per_step - 1) /
                                (int64_t(a.batch) * job.replicas_per_step);
  return job;
}

// This worker's shard of the training set, reshuffled each pass, for as many passes as the job
// could need from it (a worker alone could do every step in async mode), the next batches read
// while the current step runs.
std::unique_ptr<data::Iterator> input_of(const Args& a, const Job& job) {
  auto files = data::fashion_mnist_files(a.data, data::Split::train);
  const int64_t shard = (kTrainSize + job.workers - 1) / job.workers;
  const int64_t steps_per_pass = (shard + a.batch - 1) / a.batch;
  return data::Pipeline::from_idx(files.first, files.second)
      .shard(job.workers, job.me.index)
      .shuffle(std::min(a.shuffle_buffer, shard), uint64_t(a.seed) + uint64_t(job.me.index))
      .batch(a.batch)
      .repeat(int(job.steps / steps_per_pass + 2))
      .prefetch(2)
      .begin();
}

// The test set's correct predictions, summed over its batches (run by the chief).
double test_accuracy(Session& session, Output correct) {
  double hits = 0;
  for (int64_t i = 0; i < kTestSize / kTestBatch; ++i) hits += session.run({correct})[0].scalar_value<float>();
  return hits / double(kTestSize);
}

// What the chief prints while the job runs and at its end.
struct Progress {
  int64_t step = 0;
  double examples_per_s = 0;
  double loss = 0;
  int64_t dropped = 0;
};

void print_progress(const Job& job, const Progress& p) {
  std::printf("progress: global step %lld/%lld, %.0f examples/s, loss %.4f, dropped gradients %lld\n",
              (long long)p.step, (long long)job.steps, p.examples_per_s, p.loss, (long long)p.dropped);
  std::fflush(stdout);
}

// The chief's summary: one JSON line with --json, else a sentence.
void print_summary(const Args& a, const Job& job, int64_t global, int64_t timed_steps, double seconds, double loss,
                   double accuracy, const std::vector<int64_t>& dropped, const SavedCheckpoints& saved) {
  const double steps_per_s = seconds > 0 ? double(timed_steps) / seconds : 0;
  int64_t total = 0;
  for (auto d : dropped) total += d;
  if (a.json) {
    std::printf("{\"system\":\"troupe\",\"mode\":\"%s\",\"model\":\"%s\",\"workers\":%d,\"ps\":%d,\"backup_workers\":%d,"
                "\"batch\":%d,\"global_steps\":%lld,\"timed_steps\":%lld,\"seconds\":%.3f,\"global_steps_per_s\":%.2f,"
                "\"examples_per_s\":%.1f,\"train_loss\":%.6g,\"test_accuracy\":%.4f,\"dropped_gradients\":%lld,"
                "\"dropped_per_worker\":[%s],\"checkpoints_written\":%lld,\"newest_checkpoint\":\"%s\"}\n",
                a.mode.c_str(), a.model.c_str(), job.workers, job.ps, a.backup_workers, a.batch, (long long)global,
                (long long)timed_steps, seconds, steps_per_s, steps_per_s * a.batch * job.replicas_per_step, loss,
                accuracy, (long long)total, fmt::format("{}", fmt::join(dropped, ",")).c_str(), (long long)saved.written,
                saved.newest.c_str());
  } else {
    std::printf("done: %s on %d workers, %lld global steps, %.1f global steps/s (%.0f examples/s), test accuracy %.4f",
                a.mode.c_str(), job.workers, (long long)global, steps_per_s,
                steps_per_s * a.batch * job.replicas_per_step, accuracy);
    if (a.mode == "sync") std::printf(", dropped gradients per worker [%s]", fmt::format("{}", fmt::join(dropped, ", ")).c_str());
    std::printf("\n");
    if (!a.checkpoint_dir.empty()) std::printf("checkpoints: %s\n", saved.summary(a.checkpoint_dir).c_str());
  }
  std::fflush(stdout);
}

// What a mode gives the training loop: its session, one step, and what the chief reads.
struct Trainer {
  Session* session = nullptr;
  Saver* saver = nullptr;  // the chief's, with --checkpoint-dir
  // The parameter-server modes' with --checkpoint-dir: runs what uses the ps tasks, recovering
  // from a lost one (actors/supervisor.hpp); null: run as is.
  Supervisor* supervisor = nullptr;
  template <class F>
  auto supervised(F&& f) -> decltype(f()) {
    return supervisor ? supervisor->run(std::forward<F>(f)) : f();
  }
  Output images, labels, correct;
  // One step on a batch: its loss and the global step after it; adds its dropped gradients.
  // `run`: the options of its session run (RunOptions::trace: traced).
  std::function<std::pair<float, int64_t>(FeedList, int64_t& dropped, const RunOptions& run)> step;
  std::function<std::vector<int64_t>()> dropped_per_worker;  // sync: per worker so far
  std::function<void()> at_end;                              // the chief's, after the last step
};

// The training loop of every mode, from global step `global` to the job's last: the input, the
// straggler's delay, and for the chief the timing, progress lines, checkpoints, evaluation and
// summary.
int drive(const Args& a, const Job& job, Trainer& t, int64_t global) {
  std::printf("worker:%d: %s training of %s from global step %lld to %lld: %d workers (%d per step), %d ps, batch %d\n",
              job.me.index, a.mode.c_str(), a.model.c_str(), (long long)global, (long long)job.steps, job.workers,
              job.replicas_per_step, job.ps, a.batch);
  std::fflush(stdout);
  auto total = [](const std::vector<int64_t>& v) {
    int64_t sum = 0;
    for (auto x : v) sum += x;
    return sum;
  };
  auto dropped_now = [&] {
    return t.dropped_per_worker ? t.supervised(t.dropped_per_worker) : std::vector<int64_t>{};
  };
  // Checkpoints (the chief's). A save that fails in a way no recovery mends (a directory that
  // cannot be written, a full disk: permission_denied, resource_exhausted, ...) fails the job. One
  // a lost ps task explains (unavailable; failed_precondition: its variables not yet restored) is
  // tried again at the next step, while the supervisor recovers the task, for at most
  // save_retry_bound; past it, the job fails too.
  SavedCheckpoints saved;
  std::optional<Clock::time_point> save_failing_since;
  const auto save_retry_bound = 2 * std::chrono::duration<double>(a.recovery_grace_s) + std::chrono::seconds(10);
  auto try_save = [&](const std::function<void()>& save) -> bool {
    try {
      save();
      save_failing_since.reset();
      return true;
    } catch (const Error& e) {
      if (!t.supervisor || (e.code() != ErrorCode::unavailable && e.code() != ErrorCode::failed_precondition)) throw;
      if (!save_failing_since) save_failing_since = Clock::now();
      const double failing = seconds_since(*save_failing_since);
      if (failing > save_retry_bound.count())
        fail(e.code(), "worker:{}: no checkpoint could be written into {} for {:.1f} s (a lost task did not come back "
             "within {:.0f} s): {}", job.me.index, a.checkpoint_dir, failing, save_retry_bound.count(), e.what());
      std::printf("worker:%d: a checkpoint was not written (it is tried again at the next step): %s\n", job.me.index,
                  e.what());
      std::fflush(stdout);
      return false;
    }
  };
  std::unique_ptr<data::Iterator> input = input_of(a, job);
  const bool straggler = a.delay_ms > 0 && job.me.index == (a.delay_worker >= 0 ? a.delay_worker : job.workers - 1);
  const int64_t first = global;
  int64_t local_steps = 0, my_dropped = 0;
  std::optional<Clock::time_point> timed_from;  // when the chief saw the warm-up end
  int64_t timed_from_step = 0;
  auto last_report = Clock::now();
  int64_t last_report_step = global;
  double loss_avg = 0;  // moving average of this worker's losses
  // The chief's TensorBoard scalars and report points, at every progress report (every 2 s) and
  // at the end; its steps --trace-steps (its own count) traced.
  std::optional<RunLog> log;
  if (job.chief)
    log.emplace(a, fmt::format("troupe-fashion-mnist {} on a cluster: {} mode, {} worker(s), {} ps, {} lr {}, batch {}",
                               a.model, a.mode, job.workers, job.ps, a.optimizer, a.lr, a.batch));
  int64_t saved_step = global;
  bool save_again = false;  // the last save failed: the next step tries again
  std::future<std::string> saving;
  while (global < job.steps) {
    if (straggler) std::this_thread::sleep_for(std::chrono::milliseconds(a.delay_ms));
    std::optional<data::Element> next = input->next();
    if (!next) fail(ErrorCode::out_of_range, "worker:{}: the input pipeline ended early", job.me.index);
    data::Element batch = std::move(*next);
    RunOptions run;
    run.trace = job.chief && !a.trace.empty() && local_steps + 1 >= a.trace_first && local_steps + 1 <= a.trace_last;
    auto [l, after] =
        t.supervised([&] { return t.step({{t.images, batch[0]}, {t.labels, batch[1]}}, my_dropped, run); });
    if (run.trace && local_steps + 1 == a.trace_last) {
      t.session->write_trace();
      std::printf("worker:%d: trace of its steps %lld-%lld: %s\n", job.me.index, (long long)a.trace_first,
                  (long long)a.trace_last, a.trace.c_str());
    }
    global = after;
    if (t.supervisor) t.supervisor->saw_global_step(global);
    if (!std::isfinite(l))
      fail(ErrorCode::aborted, "worker:{}: the loss diverged ({}) at global step {}", job.me.index, l, global);
    loss_avg = local_steps == 0 ? l : 0.95 * loss_avg + 0.05 * l;
    ++local_steps;
    if (!job.chief) continue;
    if (!timed_from && global - first >= a.warmup_steps) {
      timed_from = Clock::now();
      timed_from_step = global;
    }
    if (t.saver && a.save_every_steps > 0 &&
        (save_again || global / a.save_every_steps != saved_step / a.save_every_steps)) {
      if (saving.valid()) try_save([&] { saved.add(saving.get()); });
      save_again = !try_save([&] { saving = t.saver->save_async(a.checkpoint_dir, global); });
      saved_step = global;
    }
    const double since = seconds_since(last_report);
    if (since >= 2.0 || global >= job.steps) {
      const Progress p{global, double(global - last_report_step) * a.batch * job.replicas_per_step / since, loss_avg,
                       total(dropped_now())};
      print_progress(job, p);
      log->train(global, p.loss, p.examples_per_s, a.lr, a.mode == "sync" ? p.dropped : -1);
      last_report = Clock::now();
      last_report_step = global;
    }
  }
  if (job.chief && t.at_end) t.supervised(t.at_end);
  if (!job.chief) {
    std::printf("worker:%d: done at global step %lld: %lld steps of its own, %lld gradients dropped\n", job.me.index,
                (long long)global, (long long)local_steps, (long long)my_dropped);
    return 0;
  }
  const double seconds = timed_from ? seconds_since(*timed_from) : 0;
  if (t.saver) {
    if (saving.valid() && !try_save([&] { saved.add(saving.get()); })) save_again = true;
    // The last step's checkpoint, through the supervisor: a lost task is waited for and restored.
    if (saved_step != global || save_again)
      saved.add(t.supervised([&] { return t.saver->save(a.checkpoint_dir, global); }));
    saved.check_some(a.checkpoint_dir);
  }
  const double accuracy = t.supervised([&] { return test_accuracy(*t.session, t.correct); });
  log->accuracy(global, accuracy);
  print_summary(a, job, global, global - timed_from_step, seconds, loss_avg, accuracy, dropped_now(), saved);
  log->finish(fmt::format("done at global step {}: test accuracy {:.4f}, {:.1f} global steps/s after the warm-up", global,
                          accuracy, seconds > 0 ? double(global - timed_from_step) / seconds : 0.0));
  return 0;
}

// The model, its training input (fed) and loss, and its correct predictions on a test batch.
struct Net {
  layers::Sequential model;
  struct {
    Output images, labels, loss, correct;
  } io;
  Net(const Args& a, const Scope& s) : model(s, a.seed) {
    build_model(model, a.model);
    io.images = ops::placeholder(s.with_op_name("train_images"), DType::float32, PartialShape{-1, 1, 28, 28});
    io.labels = ops::placeholder(s.with_op_name("train_labels"), DType::int32, PartialShape{-1});
    io.loss = model.loss(model(io.images, layers::Mode::training), io.labels);
    auto test_in = ops::dataset_batches(s.sub("test_data"),
                                        {.images_path = data_file(a.data, "t10k-images-idx3-ubyte"),
                                         .labels_path = data_file(a.data, "t10k-labels-idx1-ubyte"),
                                         .batch_size = kTestBatch});
    auto test_logits = model(test_in[0], layers::Mode::inference);
    io.correct = ops::sum(s, ops::cast(s, ops::equal(s, ops::argmax(s, test_logits, -1), ops::cast(s, test_in[1], DType::int64)),
                                       DType::float32));
  }
};

// The parameter-server modes: one graph per worker over the ps tasks.
int run_with_parameter_servers(const Args& a, const Job& job) {
  const bool sync = a.mode == "sync";
  auto root = Scope::root();
  const std::string my_device = fmt::format("/job:worker/task:{}", job.me.index);
  auto s = root.with_device_function(replica_device_setter(job.ps, {.worker_device = my_device}));
  Net net(a, s);
  auto& [images, labels, loss, correct] = net.io;
  auto global_step = ops::global_step(s);
  Node* train = nullptr;
  std::optional<SyncTrainOp> sync_train;
  if (sync) {
    SyncReplicasOptimizer optimizer(make_optimizer(a), {.replicas_to_aggregate = job.replicas_per_step,
                                                        .total_replicas = job.workers,
                                                        .replica = job.me.index});
    sync_train = optimizer.minimize(s, loss, global_step.value);
    train = sync_train->op;
  } else {
    train = make_optimizer(a).minimize(s, loss, {}, global_step.value);
  }

  SessionOptions options;
  options.target = "troupe://" + job.spec.address(job.me).to_string();
  options.threads = a.threads;
  options.operation_timeout = kStepTimeout;
  // The other processes may still be starting.
  options.cluster_startup_timeout = std::chrono::milliseconds(int64_t(a.startup_timeout_s * 1000));
  options.tls = job.spec.tls_for(job.me);
  options.on_waiting = [who = a.where.task_name()](const std::string& line) {
    std::fprintf(stderr, "troupe-fashion-mnist %s: %s\n", who.c_str(), line.c_str());
  };
  if (job.chief) options.trace.file = a.trace;
  Session session(root, options);

  // The chief's: it restores a restarted ps task's variables (with --checkpoint-dir) and saves.
  std::optional<Saver> saver;
  if (job.chief) saver.emplace(session, SaverOptions{.max_to_keep = 5});
  if (job.chief && !a.checkpoint_dir.empty()) saver->check_directory(a.checkpoint_dir);
  std::vector<TensorName> counters;
  if (sync)
    for (auto& c : sync_train->dropped_counters) counters.push_back(c);
  auto dropped_per_worker = [&] {
    std::vector<int64_t> out;
    if (counters.empty()) return out;
    for (auto& t : session.run(counters)) out.push_back(t.scalar_value<int64_t>());
    return out;
  };

  // Every worker runs its steps under a supervisor, whatever its flags, so that the job's recovery
  // does not depend on each worker's command line: a ps task that dies and comes back
  // (troupe-launch --restart-ps) gets its variables back from the chief's newest checkpoint (with
  // --checkpoint-dir; without one the job fails naming the task whose variables are lost), and
  // every worker goes on. In sync mode the chief's supervisor also watches the replicas: while
  // fewer than m are alive (a worker lost, no backup to cover it), steps complete with the
  // gradients of those alive.
  std::optional<Supervisor> supervisor;
  {
    SupervisorOptions options{.checkpoint_dir = job.chief ? a.checkpoint_dir : std::string(),
                              .grace = std::chrono::milliseconds(int64_t(a.recovery_grace_s * 1000)),
                              .on_recovery = [&](const Recovery& r) {
                                std::printf("worker:%d: %s\n", job.me.index, r.describe().c_str());
                                std::fflush(stdout);
                              }};
    options.on_waiting = [&](const std::string& line) {
      std::printf("worker:%d: %s\n", job.me.index, line.c_str());
      std::fflush(stdout);
    };
    if (sync && job.chief) {
      SupervisorOptions::SyncReplicas replicas{.replicas_to_aggregate = job.replicas_per_step,
                                               .aggregate = sync_train->aggregate,
                                               .set_aggregate = sync_train->set_aggregate,
                                               .global_step = global_step.value,
                                               .last_step = job.steps,
                                               .stop = sync_train->stop};
      for (int k = 0; k < job.workers; ++k) replicas.tasks.push_back(fmt::format("worker:{}", k));
      options.sync = std::move(replicas);
      options.on_replicas = [&](const std::string& line) {
        std::printf("worker:%d: %s\n", job.me.index, line.c_str());
        std::fflush(stdout);
      };
    }
    supervisor.emplace(session, job.chief ? &*saver : nullptr, std::move(options));
  }
  // The chief initialises (the global step last: the others wait for it) or restores; the
  // others, and a chief started again mid-job (--rejoin), wait until the global step can be read
  // (a rejoining chief through its supervisor: a ps task restarted while it was away is restored).
  int64_t global = 0;
  auto read_global = [&] { return session.run({global_step.value})[0].scalar_value<int64_t>(); };
  if (job.chief && !a.rejoin) {
    if (std::optional<std::string> latest = checkpoint_to_resume(a)) {
      global = restore_checkpoint(a, *latest, [&](const std::string& p) { return saver->restore(p); }).global_step;
      std::printf("resumed from global step %lld of %s\n", (long long)global, latest->c_str());
    } else {
      std::vector<Output> all;
      for (auto& v : ops::global_variables(root.graph()))
        if (v.node()->name != global_step.value.node()->name) all.push_back(v);
      session.run({}, {}, {ops::variables_initializer(root.sub("init"), all)});
      session.run({}, {}, {global_step.init});
    }
  } else if (job.chief) {
    global = supervisor->run(read_global);
  } else {
    const auto start = Clock::now();
    const auto deadline = start + kInitTimeout;
    WaitNotice notice;
    for (;;) {
      try {
        global = supervisor->run(read_global);  // (a ps task lost meanwhile is waited for)
        break;
      } catch (const Error& e) {
        if (e.code() != ErrorCode::failed_precondition || Clock::now() > deadline)
          fail(e.code(), "worker:{} waited {:.1f} s (at most {} s) for the chief (worker:0) to initialise the variables: {}",
               job.me.index, seconds_since(start), kInitTimeout.count(), e.what());
        if (notice.due()) {
          std::printf("worker:%d: %swaiting for the chief (worker:0) to initialise the variables (%.0f s of at most %lld)\n",
                      job.me.index, notice.first() ? "" : "still ", seconds_since(start), (long long)kInitTimeout.count());
          std::fflush(stdout);
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  }
  if (a.rejoin) std::printf("worker:%d: rejoined the job at global step %lld\n", job.me.index, (long long)global);
  Trainer t;
  t.session = &session;
  t.correct = correct;
  t.saver = saver && !a.checkpoint_dir.empty() ? &*saver : nullptr;
  t.supervisor = &*supervisor;
  t.step = [&, sync](FeedList feeds, int64_t& dropped, const RunOptions& run) -> std::pair<float, int64_t> {
    if (sync) {
      auto out = session.run(feeds, {loss, sync_train->next_step, sync_train->dropped}, {train}, run);
      dropped += out[2].scalar_value<int64_t>();
      return {out[0].scalar_value<float>(), out[1].scalar_value<int64_t>()};
    }
    auto out = session.run(feeds, {loss, global_step.value}, {train}, run);
    // The read at the step's start, and this step's update.
    return {out[0].scalar_value<float>(), out[1].scalar_value<int64_t>() + 1};
  };
  t.images = images;
  t.labels = labels;
  t.dropped_per_worker = dropped_per_worker;
  // The end: a straggler waiting on (or yet to start) a step after the last is let go.
  if (sync)
    t.at_end = [&] {
      if (supervisor) supervisor->stop_watching_replicas();  // the others leave now: not lost replicas
      session.run({}, {}, {sync_train->stop});
    };
  return drive(a, job, t, global);
}


// The all-reduce mode: every worker holds the variables in a session of its own; each step's
// gradients are summed over the workers by ring all-reduce, averaged, and applied here, so every
// worker applies the same update to the same weights.
int run_with_allreduce(const Args& a, const Job& job, ClusterMember& member) {
  AllReduceGroup group(member, "worker", {.float16 = a.float16, .timeout = kStepTimeout});
  auto root = Scope::root();
  Net net(a, root);
  auto& [images, labels, loss, correct] = net.io;
  auto global_step = ops::global_step(root);
  const std::vector<Output> variables = ops::trainable_variables(root.graph());
  const std::vector<Output> grads = gradients(root, {loss}, variables);
  // The averaged gradients come back in through placeholders; the optimizer applies them.
  std::vector<Output> averaged;
  for (std::size_t i = 0; i < variables.size(); ++i)
    averaged.push_back(ops::placeholder(root.with_op_name(fmt::format("averaged_gradient_{}", i)), grads[i].dtype(),
                                        grads[i].shape()));
  Node* apply = make_optimizer(a).apply_gradients(root, averaged, variables, global_step.value);
  // The chief's values, handed to every worker: a sum where only the chief adds its own.
  std::vector<Output> incoming;
  std::vector<OpName> assigns;
  for (std::size_t i = 0; i < variables.size(); ++i) {
    incoming.push_back(ops::placeholder(root.with_op_name(fmt::format("chief_value_{}", i)), variables[i].dtype(),
                                        variables[i].shape()));
    assigns.push_back(ops::assign(root, variables[i], incoming.back()));
  }
  SessionOptions options;
  options.threads = a.threads;
  if (job.chief) options.trace.file = a.trace;  // its own process's steps: the ring is outside the graph
  Session session(root, options);
  std::optional<Saver> saver;
  if (!a.checkpoint_dir.empty()) saver.emplace(session, SaverOptions{.max_to_keep = 5});
  if (saver && job.chief) saver->check_directory(a.checkpoint_dir);  // the chief saves
  // Every worker restores the newest checkpoint (slots included) or initialises; then the chief's
  // weights go to everyone, so all start from the same bits whatever their seeds.
  int64_t global = 0;
  std::optional<std::string> latest = checkpoint_to_resume(a);
  if (latest) {
    global = restore_checkpoint(a, *latest, [&](const std::string& p) { return saver->restore(p); }).global_step;
    std::printf("worker:%d: resumed from global step %lld of %s\n", job.me.index, (long long)global, latest->c_str());
  } else {
    session.run({}, {}, {ops::global_variables_initializer(root)});
  }
  std::vector<TensorName> variable_names(variables.begin(), variables.end());
  std::vector<Tensor> values = session.run(variable_names);
  for (auto& v : values) {
    v = v.copy();  // a buffer of our own (the shard's is shared)
    if (!job.chief) std::memset(v.raw_data(), 0, v.byte_size());
  }
  group.all_reduce(values);
  FeedList set;
  for (std::size_t i = 0; i < values.size(); ++i) set.push_back({incoming[i], values[i]});
  session.run(set, {}, assigns);

  std::vector<TensorName> fetches = {loss};
  fetches.insert(fetches.end(), grads.begin(), grads.end());
  const double scale = 1.0 / double(job.workers);
  Trainer t;
  t.session = &session;
  t.saver = job.chief && saver ? &*saver : nullptr;
  t.images = images;
  t.labels = labels;
  t.correct = correct;
  t.step = [&](FeedList feeds, int64_t&, const RunOptions& run) -> std::pair<float, int64_t> {
    std::vector<Tensor> out = session.run(feeds, fetches, {}, run);
    std::vector<Tensor> g(out.begin() + 1, out.end());
    group.all_reduce(g);
    FeedList in;
    for (std::size_t i = 0; i < g.size(); ++i) {
      // The sum over the workers, averaged in the gradient's own floating dtype.
      visit_dtype(g[i].dtype(), [&](auto zero) {
        using T = decltype(zero);
        if constexpr (std::is_floating_point_v<T>) {
          T* p = g[i].data<T>();
          for (int64_t k = 0, n = g[i].num_elements(); k < n; ++k) p[k] *= T(scale);
        } else {
          fail(ErrorCode::invalid_argument, "all-reduce training averages floating gradients; the gradient of '{}' is {}",
               variables[i].name(), name_of(g[i].dtype()));
        }
      });
      in.push_back({averaged[i], g[i]});
    }
    session.run(in, {}, {apply}, run);
    return {out[0].scalar_value<float>(), ++global};
  };
  const int code = drive(a, job, t, global);
  // Every worker's weights, as one fingerprint (core/fingerprint.hpp, variable by variable): the
  // same on all.
  uint64_t fingerprint = 0;
  for (auto& v : session.run(variable_names))
    fingerprint = mix64(fingerprint ^ fnv1a64({static_cast<const char*>(v.raw_data()), v.byte_size()}));
  std::printf("worker:%d: weights fingerprint %016llx\n", job.me.index, (unsigned long long)fingerprint);
  std::fflush(stdout);
  return code;
}

}  // namespace

int run_cluster(const Args& a) {
  try {
    const Job job = job_of(a);
    // This process is its task's member: the ps tasks' peers, the partitions masters register.
    // The member's own log (peers connected and lost, partitions registered) goes to stderr, as
    // troupe-node's does: a job's hang names what its connections did.
    MemberOptions options{.threads = a.threads, .tls = job.spec.tls_for(job.me)};
    options.log = [who = a.where.task_name()](const std::string& line) {
      std::fprintf(stderr, "troupe-fashion-mnist %s: %s\n", who.c_str(), line.c_str());
    };
    ClusterMember member(job.spec, job.me, options);
    if (a.mode == "allreduce") return run_with_allreduce(a, job, member);
    return run_with_parameter_servers(a, job);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-fashion-mnist %s: %s\n", a.where.task_name().c_str(), e.what());
    return 1;
  }
}

}  // namespace troupe::app
