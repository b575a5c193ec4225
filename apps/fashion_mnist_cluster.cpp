// troupe-fashion-mnist as one worker of a cluster job (--cluster SPEC --task worker:K, or
// TF_CONFIG), on train::TrainingSession (train/training_session.hpp) in the strategy --mode
// names (docs/cluster.md, "Training on a cluster"): async and sync over parameter servers, or
// allreduce among the workers. The session hosts the task's cluster member, initialises or
// restores (the chief) or waits for the chief, and supervises the steps; this file adds the
// model, each worker's shard of the input, the straggler (--delay-ms), the traced steps, and the
// chief's progress lines ("progress: ..." lines, which troupe-launch shows as one display),
// checkpoints, evaluation and summary (--json: one JSON line).
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <string>
#include <thread>

#include "apps/fashion_mnist.hpp"
#include "apps/run_log.hpp"
#include "ops/all.hpp"
#include "ops/data/batch_reader.hpp"
#include "ops/data/idx.hpp"
#include "ops/data/pipeline.hpp"
#include "train/hooks.hpp"
#include "train/training_session.hpp"

namespace troupe::app {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int64_t kTrainSize = 60000, kTestSize = 10000, kTestBatch = 1000;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// The model: its loss on the fed batch, and its accuracy on a batch of the test set that a
// reader in the graph gives (kTestSize / kTestBatch batches make one evaluation).
train::Model fashion_mnist_model(const Args& a, const Scope& s) {
  layers::Sequential model(s, a.seed);
  build_model(model, a.model);
  auto images = ops::placeholder(s.with_op_name("train_images"), DType::float32, PartialShape{-1, 1, 28, 28});
  auto labels = ops::placeholder(s.with_op_name("train_labels"), DType::int32, PartialShape{-1});
  auto loss = model.loss(model(images, layers::Mode::training), labels);
  auto test_in = ops::dataset_batches(s.sub("test_data"), {.images_path = data_file(a.data, "t10k-images-idx3-ubyte"),
                                                           .labels_path = data_file(a.data, "t10k-labels-idx1-ubyte"),
                                                           .batch_size = kTestBatch});
  auto test_logits = model(test_in[0], layers::Mode::inference);
  auto hits = ops::cast(s, ops::equal(s, ops::argmax(s, test_logits, -1), ops::cast(s, test_in[1], DType::int64)),
                        DType::float32);
  return {.loss = loss, .inputs = {images, labels}, .metrics = {{"accuracy", ops::mean(s, hits)}}};
}

// This worker's shard of the training set, reshuffled each pass, for as many passes as the job
// could need from it (a worker alone could do every step in async mode), the next batches read
// while the current step runs.
std::unique_ptr<data::Iterator> input_of(const Args& a, int64_t steps) {
  auto files = data::fashion_mnist_files(a.data, data::Split::train);
  const int workers = a.where.num_workers(), me = a.where.worker_index();
  const int64_t shard = (kTrainSize + workers - 1) / workers;
  const int64_t steps_per_pass = (shard + a.batch - 1) / a.batch;
  return data::Pipeline::from_idx(files.first, files.second)
      .shard(workers, me)
      .shuffle(std::min(a.shuffle_buffer, shard), uint64_t(a.seed) + uint64_t(me))
      .batch(a.batch)
      .repeat(int(steps / steps_per_pass + 2))
      .prefetch(2)
      .begin();
}

// The chief's summary: one JSON line with --json, else a sentence.
void print_summary(const Args& a, const train::TrainingSession& session, int64_t timed_steps, double seconds,
                   double loss, double accuracy, const std::vector<int64_t>& dropped,
                   const train::CheckpointHook* saved) {
  const double steps_per_s = seconds > 0 ? double(timed_steps) / seconds : 0;
  const double examples_per_s = steps_per_s * a.batch * session.replicas_per_step();
  const int64_t global = session.global_step();
  int64_t total = 0;
  for (auto d : dropped) total += d;
  if (a.json) {
    std::printf("{\"system\":\"troupe\",\"mode\":\"%s\",\"model\":\"%s\",\"workers\":%d,\"ps\":%d,\"backup_workers\":%d,"
                "\"batch\":%d,\"global_steps\":%lld,\"timed_steps\":%lld,\"seconds\":%.3f,\"global_steps_per_s\":%.2f,"
                "\"examples_per_s\":%.1f,\"train_loss\":%.6g,\"test_accuracy\":%.4f,\"dropped_gradients\":%lld,"
                "\"dropped_per_worker\":[%s],\"checkpoints_written\":%lld,\"newest_checkpoint\":\"%s\"}\n",
                a.mode.c_str(), a.model.c_str(), session.num_workers(), a.where.num_ps(), a.backup_workers, a.batch,
                (long long)global, (long long)timed_steps, seconds, steps_per_s, examples_per_s, loss, accuracy,
                (long long)total, fmt::format("{}", fmt::join(dropped, ",")).c_str(),
                (long long)(saved ? saved->written() : 0), saved ? saved->newest().c_str() : "");
  } else {
    std::printf("done: %s on %d workers, %lld global steps, %.1f global steps/s (%.0f examples/s), test accuracy %.4f",
                a.mode.c_str(), session.num_workers(), (long long)global, steps_per_s, examples_per_s, accuracy);
    if (a.mode == "sync") std::printf(", dropped gradients per worker [%s]", fmt::format("{}", fmt::join(dropped, ", ")).c_str());
    std::printf("\n");
    if (saved) std::printf("checkpoints: %s\n", saved->summary(a.checkpoint_dir).c_str());
  }
  std::fflush(stdout);
}

}  // namespace

int run_cluster(const Args& a) {
  try {
    train::TrainingOptions options{.strategy = train::parse_strategy(a.mode),
                                   .backup_workers = a.backup_workers,
                                   .float16_allreduce = a.float16,
                                   .checkpoint_dir = a.checkpoint_dir,
                                   .restore_from = a.restore_from,
                                   .rejoin = a.rejoin,
                                   .threads = a.threads,
                                   .startup_timeout = std::chrono::milliseconds(int64_t(a.startup_timeout_s * 1000)),
                                   .recovery_grace = std::chrono::milliseconds(int64_t(a.recovery_grace_s * 1000)),
                                   .trace_file = a.trace};
    const int64_t steps =
        a.steps > 0 ? a.steps : train::steps_for_epochs(a.where, options, a.epochs, kTrainSize, a.batch);
    options.last_step = steps;
    train::TrainingSession session(a.where, make_optimizer(a),
                                   [&](const Scope& s) { return fashion_mnist_model(a, s); }, options);
    const bool chief = session.is_chief();
    const int me = a.where.worker_index();
    std::printf("worker:%d: %s training of %s from global step %lld to %lld: %d workers (%d per step), %d ps, batch %d\n",
                me, a.mode.c_str(), a.model.c_str(), (long long)session.global_step(), (long long)steps,
                session.num_workers(), session.replicas_per_step(), a.where.num_ps(), a.batch);
    std::fflush(stdout);

    // The chief's progress lines, TensorBoard scalars and report points (RunLog), checkpoints and
    // evaluation at the end (through the supervisor: a lost ps task is waited for).
    std::optional<RunLog> log;
    if (chief)
      log.emplace(a, fmt::format("troupe-fashion-mnist {} on a cluster: {} mode, {} worker(s), {} ps, {} lr {}, batch {}",
                                 a.model, a.mode, session.num_workers(), a.where.num_ps(), a.optimizer, a.lr, a.batch));
    auto progress = std::make_shared<train::ProgressHook>(train::ProgressHook::Options{
        .format = train::ProgressHook::Format::plain, .on_report = [&](const train::ProgressHook::Report& r) {
          log->train(r.global_step, r.loss, r.examples_per_s, a.lr, r.dropped);
        }});
    session.add_hook(progress);
    std::shared_ptr<train::CheckpointHook> checkpoints;
    if (!a.checkpoint_dir.empty()) {
      checkpoints = std::make_shared<train::CheckpointHook>(train::CheckpointHook::every_steps(a.save_every_steps));
      session.add_hook(checkpoints);
    }
    double accuracy = 0;
    session.add_hook(std::make_shared<train::EvaluationHook>(train::EvaluationOptions{
        .batches = kTestSize / kTestBatch, .on_result = [&](int64_t step, const std::map<std::string, double>& m) {
          accuracy = m.at("accuracy");
          log->accuracy(step, accuracy);
        }}));

    std::unique_ptr<data::Iterator> input = input_of(a, steps);
    const bool straggler = a.delay_ms > 0 && me == (a.delay_worker >= 0 ? a.delay_worker : session.num_workers() - 1);
    const int64_t first = session.global_step();
    int64_t local_steps = 0, my_dropped = 0, timed_from_step = 0;
    std::optional<Clock::time_point> timed_from;  // when the chief saw the warm-up end
    session.begin();
    while (!session.should_stop()) {
      if (straggler) std::this_thread::sleep_for(std::chrono::milliseconds(a.delay_ms));
      std::optional<data::Element> batch = input->next();
      if (!batch) fail(ErrorCode::out_of_range, "worker:{}: the input pipeline ended early", me);
      // The chief's steps --trace-steps (its own count) are traced.
      RunOptions run;
      run.trace = chief && !a.trace.empty() && local_steps + 1 >= a.trace_first && local_steps + 1 <= a.trace_last;
      const train::StepInfo info = session.step(*batch, run);
      ++local_steps;
      my_dropped += info.dropped;
      if (run.trace && local_steps == a.trace_last) {
        session.session().write_trace();
        std::printf("worker:%d: trace of its steps %lld-%lld: %s\n", me, (long long)a.trace_first,
                    (long long)a.trace_last, a.trace.c_str());
      }
      if (chief && !timed_from && info.global_step - first >= a.warmup_steps) {
        timed_from = Clock::now();
        timed_from_step = info.global_step;
      }
    }
    const double seconds = timed_from ? seconds_since(*timed_from) : 0;
    session.close();  // the sync job's end, the last checkpoint, the evaluation
    if (chief) {
      print_summary(a, session, session.global_step() - timed_from_step, seconds, progress->loss(), accuracy,
                    session.dropped_per_worker(), checkpoints.get());
      log->finish(fmt::format("done at global step {}: test accuracy {:.4f}, {:.1f} global steps/s after the warm-up",
                              session.global_step(), accuracy,
                              seconds > 0 ? double(session.global_step() - timed_from_step) / seconds : 0.0));
    } else {
      std::printf("worker:%d: done at global step %lld: %lld steps of its own, %lld gradients dropped\n", me,
                  (long long)session.global_step(), (long long)local_steps, (long long)my_dropped);
    }
    // Every worker's weights, as one fingerprint: the same on all.
    if (a.mode == "allreduce")
      std::printf("worker:%d: weights fingerprint %016llx\n", me, (unsigned long long)session.weights_fingerprint());
    std::fflush(stdout);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-fashion-mnist %s: %s\n", a.where.task_name().c_str(), e.what());
    return 1;
  }
}

}  // namespace troupe::app
