// troupe-fashion-mnist: trains a LeNet-style CNN or an MLP on Fashion-MNIST on
// train::TrainingSession (train/training_session.hpp), alone or as one worker of a cluster job
// (fashion_mnist_cluster.cpp), evaluates on the 10,000 test images after each epoch, and prints a
// summary. Alone, the training input is a data::Pipeline (the IDX files streamed each epoch,
// shuffled through a buffer, batched) that a Prefetcher runs on its own thread into a queue the
// graph dequeues from, so reading overlaps the steps (--prefetch 0: read in the training loop
// and fed instead). The test input is read inside the graph (DatasetBatches).
//
// With --checkpoint-dir DIR it saves a checkpoint (weights, optimizer slots; the global step is
// the checkpoint's step) every --save-every-steps steps and at the end (train::CheckpointHook),
// and a run that finds a checkpoint in DIR resumes from it: the restored weights, and the input
// from the same place in the same sequence (the epoch and batch follow from the global step,
// since every epoch has the same number of batches, and each epoch's order from (seed, epoch)).
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>
#include <optional>
#include <string>

#include "actors/prefetch.hpp"
#include "apps/cli_checks.hpp"
#include "apps/fashion_mnist.hpp"
#include "apps/run_log.hpp"
#include "core/checkpoint.hpp"
#include "devices/cpu_threads.hpp"
#include "ops/all.hpp"
#include "ops/data/batch_reader.hpp"
#include "ops/data/idx.hpp"
#include "ops/data/pipeline.hpp"
#include "ops/layers/layers.hpp"
#include "train/hooks.hpp"
#include "train/training_session.hpp"

using namespace troupe;

namespace troupe::app {

Args parse_args(int argc, char** argv) {
  Args a;
  CLI::App app{"troupe-fashion-mnist: trains a CNN or an MLP on Fashion-MNIST, on one process or a cluster"};
  app.option_defaults()->always_capture_default();
  app.add_option("--model", a.model, "cnn or mlp")->check(CLI::IsMember({"cnn", "mlp"}));
  app.add_option("--epochs", a.epochs, "passes over the training set")->check(troupe::cli::positive);
  app.add_option("--batch", a.batch, "examples per step (per worker on a cluster)")->check(troupe::cli::positive);
  app.add_option("--optimizer", a.optimizer, "sgd, momentum, adam, adagrad or rmsprop")
      ->check(CLI::IsMember({"sgd", "momentum", "adam", "adagrad", "rmsprop"}));
  app.add_option("--lr", a.lr, "learning rate")->check(troupe::cli::positive);
  app.add_option("--momentum", a.momentum, "momentum (momentum optimizer)")->check(troupe::cli::non_negative);
  app.add_option("--seed", a.seed, "seed of the weights and the shuffle");
  app.add_option("--threads", a.threads, "threads that compute at once (0: the cores this process may use)")
      ->check(troupe::cli::non_negative);
  app.add_option("--data", a.data, "directory of the Fashion-MNIST IDX files")->check(CLI::ExistingDirectory);
  app.add_option("--prefetch", a.prefetch, "batches read ahead on a thread of their own (0: read in the loop)")
      ->check(troupe::cli::non_negative);
  app.add_option("--shuffle-buffer", a.shuffle_buffer, "examples the shuffle draws from")->check(troupe::cli::positive);
  app.add_option("--checkpoint-dir", a.checkpoint_dir,
                 "save checkpoints here and resume from the newest (checked to be writable before training starts)");
  app.add_option("--restore-from", a.restore_from,
                 "resume from this checkpoint of --checkpoint-dir (ckpt-N, e.g. an older one when the newest is "
                 "damaged) instead of the newest");
  app.add_option("--save-every-steps", a.save_every_steps, "steps between checkpoints (-1: 500 with a checkpoint dir; 0: only at the end)")
      ->check(CLI::Range(int64_t(-1), std::numeric_limits<int64_t>::max()));
  app.add_option("--stop-after-epochs", a.stop_after_epochs, "save and stop after this epoch (0: train every epoch)")
      ->check(troupe::cli::non_negative);
  app.add_option("--stop-after-steps", a.stop_after_steps, "save and stop at this global step (0: no stop)")
      ->check(troupe::cli::non_negative);
  app.add_flag("--json", a.json, "one JSON line per epoch (on a cluster: the chief's summary)");
  app.add_option("--logdir", a.logdir,
                 "write TensorBoard event files here: train/loss, train/examples_per_s, train/learning_rate every 20 "
                 "steps, test/accuracy after each epoch and at the end (on a cluster: the chief's, with "
                 "train/dropped_gradients)");
  app.add_option("--report", a.report,
                 "write the training report (one HTML file: loss, accuracy and examples/s by step and time, time per "
                 "op type of the traced steps, the settings) here (default with --logdir: LOGDIR/report.html)");
  app.add_option("--trace", a.trace,
                 "write a Chrome trace (chrome://tracing, Perfetto) of the --trace-steps steps here (on a cluster: "
                 "the chief's steps, every task's share)");
  app.add_option("--trace-steps", a.trace_steps, "the training steps traced, A-B, counted from 1 (on a cluster: "
                                                 "the chief's own steps)");
  app.add_option("--cluster", a.cluster,
                 "cluster spec (JSON, TF_CONFIG's form): train as one worker of a cluster job (default: $TF_CONFIG, "
                 "else one process)")
      ->check(CLI::ExistingFile)
      ->group("Cluster");
  app.add_option("--task", a.task, "this process's task in the spec, worker:K (worker:0 is the chief; default: the "
                                   "spec's \"task\")")
      ->group("Cluster");
  app.add_option("--mode", a.mode, "async (parameter servers), sync (parameter servers, synchronous replicas) or allreduce (no ps)")
      ->check(CLI::IsMember({"async", "sync", "allreduce"}))
      ->group("Cluster");
  app.add_option("--backup-workers", a.backup_workers, "sync: workers whose gradients a step does not wait for")
      ->check(troupe::cli::non_negative)
      ->group("Cluster");
  app.add_option("--steps", a.steps, "global steps to train (0: --epochs' worth of examples for the whole job)")
      ->check(troupe::cli::non_negative)
      ->group("Cluster");
  app.add_option("--delay-ms", a.delay_ms, "make one worker a straggler: it sleeps this long before each step")
      ->check(troupe::cli::non_negative)
      ->group("Cluster");
  app.add_option("--delay-worker", a.delay_worker, "the straggler's index (-1: the last worker)")->group("Cluster");
  app.add_option("--warmup-steps", a.warmup_steps, "global steps before the timing starts")
      ->check(troupe::cli::non_negative)
      ->group("Cluster");
  app.add_flag("--float16", a.float16, "allreduce: float16 gradients on the wire")->group("Cluster");
  app.add_option("--recovery-grace-s", a.recovery_grace_s,
                 "with --checkpoint-dir on a cluster: how long a lost ps task may take to come back before the chief "
                 "has a spare task take it over (or, with none, the job fails)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->group("Cluster");
  app.add_option("--startup-timeout-s", a.startup_timeout_s,
                 "how long this worker waits for every task of the cluster to answer at its start (it says whom it "
                 "waits for every 10 s)")
      ->check(CLI::PositiveNumber)
      ->capture_default_str()
      ->group("Cluster");
  app.add_flag("--rejoin", a.rejoin,
               "this worker was started again mid-job: join at the current global step (the chief too: no "
               "initialisation, no restore)")
      ->group("Cluster");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    std::exit(app.exit(e));
  }
  auto refuse = [](const std::string& why) {
    std::fprintf(stderr, "troupe-fashion-mnist: %s\n", why.c_str());
    std::exit(2);
  };
  if (auto range = troupe::cli::step_range(a.trace_steps)) std::tie(a.trace_first, a.trace_last) = *range;
  else refuse("--trace-steps: '" + a.trace_steps + "' is not a range of steps A-B (1 <= A <= B)");
  if (a.save_every_steps == -1) a.save_every_steps = a.checkpoint_dir.empty() ? 0 : 500;
  if (a.save_every_steps > 0 && a.checkpoint_dir.empty()) refuse("--save-every-steps needs --checkpoint-dir");
  if (!a.restore_from.empty() && a.checkpoint_dir.empty()) refuse("--restore-from needs --checkpoint-dir");
  if (!a.restore_from.empty() && !checkpoint::checkpoint_step(a.restore_from))
    refuse("--restore-from: '" + a.restore_from + "' is not the name of a checkpoint (ckpt-N, as troupe-checkpoint ls "
           "DIR/ckpt-N shows it)");
  if (a.rejoin && !a.restore_from.empty()) refuse("--restore-from: a worker that rejoins restores nothing");
  try {
    a.where = train::where_am_i(a.cluster, a.task);
  } catch (const Error& e) {
    refuse(e.what());
  }
  if (a.where.local() && (a.backup_workers > 0 || a.delay_ms > 0 || a.steps > 0))
    refuse("--backup-workers, --delay-ms and --steps are for a cluster run (--cluster or TF_CONFIG)");
  if (a.backup_workers > 0 && a.mode != "sync") refuse("--backup-workers needs --mode sync");
  if (a.rejoin && a.where.local()) refuse("--rejoin is for a worker of a cluster job (--cluster or TF_CONFIG)");
  if (a.rejoin && a.mode == "allreduce")
    refuse("--rejoin: an all-reduce job's ring is formed once, so a worker cannot rejoin it; start the job again "
           "(it resumes from its checkpoint)");
  return a;
}

Optimizer make_optimizer(const Args& a) {
  if (a.optimizer == "sgd") return Optimizer::sgd(a.lr);
  if (a.optimizer == "momentum") return Optimizer::momentum(a.lr, a.momentum);
  if (a.optimizer == "adam") return Optimizer::adam(a.lr);
  if (a.optimizer == "adagrad") return Optimizer::adagrad(a.lr);
  if (a.optimizer == "rmsprop") return Optimizer::rmsprop(a.lr);
  fail(ErrorCode::invalid_argument, "unknown optimizer '{}'", a.optimizer);
}

void build_model(layers::Sequential& model, const std::string& kind) {
  using layers::Activation;
  if (kind == "cnn") {
    model.add(layers::Conv2D{.filters = 32, .kernel = 5, .activation = Activation::relu})
        .add(layers::MaxPool2D{.size = 2})
        .add(layers::Conv2D{.filters = 64, .kernel = 5, .activation = Activation::relu})
        .add(layers::MaxPool2D{.size = 2})
        .add(layers::Flatten{})
        .add(layers::Dense{.units = 1024, .activation = Activation::relu})
        .add(layers::Dense{.units = 10});
    return;
  }
  model.add(layers::Flatten{})
      .add(layers::Dense{.units = 256, .activation = Activation::relu})
      .add(layers::Dense{.units = 256, .activation = Activation::relu})
      .add(layers::Dense{.units = 10});
}

std::string data_file(const std::string& dir, const char* stem) {
  std::string gz = dir + "/" + stem + ".gz";
  return ::access(gz.c_str(), R_OK) == 0 ? gz : dir + "/" + stem;
}

}  // namespace troupe::app

using namespace troupe::app;

int main(int argc, char** argv) {
  troupe::bound_openmp_spinning(argv);  // another program on the same cores must not stall it
  try {
    Args a = parse_args(argc, argv);
    if (!a.where.local()) return run_cluster(a);
    const bool tty = ::isatty(STDOUT_FILENO) && !a.json;
    const int64_t train_size = 60000, test_size = 10000, test_batch = 1000;
    const int64_t steps = (train_size + a.batch - 1) / a.batch;  // per epoch
    auto train_files = data::fashion_mnist_files(a.data, data::Split::train);
    auto pipeline = data::Pipeline::from_idx(train_files.first, train_files.second)
                        .shuffle(a.shuffle_buffer, uint64_t(a.seed))
                        .batch(a.batch)
                        .repeat(a.epochs);
    // The model reads its batches from a queue a Prefetcher fills on its own thread (--prefetch
    // N), or is fed them (--prefetch 0); the test set from a reader in the graph.
    std::optional<ops::Queue> queue;
    int64_t parameters = 0;
    auto model_fn = [&](const Scope& root) {
      const std::vector<PartialShape> batch_shapes = {PartialShape{-1, 1, 28, 28}, PartialShape{-1}};
      train::Model m;
      std::vector<Output> train_in;
      if (a.prefetch > 0) {
        queue = ops::Queue::fifo(root.sub("train_data"), {DType::float32, DType::int32}, batch_shapes,
                                 {.capacity = a.prefetch, .shared_name = "fashion_mnist_train"});
        train_in = queue->dequeue(root.sub("train_data"));
        m.examples_per_step = a.batch;
      } else {
        train_in = {ops::placeholder(root.with_op_name("train_images"), DType::float32, batch_shapes[0]),
                    ops::placeholder(root.with_op_name("train_labels"), DType::int32, batch_shapes[1])};
        m.inputs = train_in;
      }
      auto test_in = ops::dataset_batches(
          root.sub("test_data"), {.images_path = data_file(a.data, "t10k-images-idx3-ubyte"),
                                  .labels_path = data_file(a.data, "t10k-labels-idx1-ubyte"),
                                  .batch_size = test_batch});
      layers::Sequential model(root, a.seed);
      build_model(model, a.model);
      m.loss = model.loss(model(train_in[0], layers::Mode::training), train_in[1]);
      auto test_logits = model(test_in[0], layers::Mode::inference);
      auto hits = ops::cast(root, ops::equal(root, ops::argmax(root, test_logits, -1),
                                             ops::cast(root, test_in[1], DType::int64)),
                            DType::float32);
      m.metrics = {{"accuracy", ops::mean(root, hits)}};
      parameters = model.num_parameters();
      return m;
    };
    train::TrainingSession session(train::ClusterConfig{}, make_optimizer(a), model_fn,
                                   {.last_step = int64_t(a.epochs) * steps,
                                    .checkpoint_dir = a.checkpoint_dir,
                                    .restore_from = a.restore_from,
                                    .threads = a.threads,
                                    .trace_file = a.trace,  // the steps traced are picked one by one (RunOptions::trace)
                                    .on_message = [](const std::string&) {}});
    session.prepare();  // the step's and the test reader's executables, before any epoch is timed

    // The steps done so far; a resumed run starts at (epoch, batch) = divmod(global_step, steps).
    int64_t global_step = session.global_step();
    if (!session.resumed_from().empty()) {
      std::printf("resumed from step %lld (epoch %lld, batch %lld) of %s\n", (long long)global_step,
                  (long long)(global_step / steps + 1), (long long)(global_step % steps), session.resumed_from().c_str());
      std::fflush(stdout);
    }
    const data::Position from = session.input_position(steps);
    if (from.epoch >= a.epochs) {
      std::printf("nothing left to train: the checkpoint is at step %lld, the end of epoch %d\n", (long long)global_step,
                  a.epochs);
      return 0;
    }
    // Saves in the background (training goes on while it writes), and the last step at the end.
    std::shared_ptr<train::CheckpointHook> checkpoints;
    if (!a.checkpoint_dir.empty()) {
      checkpoints = std::make_shared<train::CheckpointHook>(train::CheckpointHook::every_steps(a.save_every_steps));
      session.add_hook(checkpoints);
    }
    RunLog log(a, fmt::format("troupe-fashion-mnist {}: {} lr {}, batch {}, {} epoch(s)", a.model, a.optimizer, a.lr,
                              a.batch, a.epochs));
    double last_accuracy = 0;
    auto evaluation = std::make_shared<train::EvaluationHook>(train::EvaluationOptions{
        .batches = test_size / test_batch, .on_result = [&](int64_t step, const std::map<std::string, double>& m) {
          last_accuracy = m.at("accuracy");
          log.accuracy(step, last_accuracy);
        }});
    session.add_hook(evaluation);
    // Declared after the session: stopped (its destructor closes the queue) before it goes.
    std::optional<Prefetcher> prefetcher;
    std::unique_ptr<data::Iterator> batches;
    if (queue) prefetcher.emplace(session.session(), *queue, pipeline, from);
    else batches = pipeline.begin(from);
    // One training step on the next batch, from the queue or read here and fed.
    // Steps --trace-steps of this run are traced, and the trace written after the last.
    auto train_step = [&]() -> float {
      const int64_t n = global_step + 1;
      RunOptions run;
      run.trace = !a.trace.empty() && n >= a.trace_first && n <= a.trace_last;
      data::Element batch;
      if (batches) {
        auto next = batches->next();
        if (!next) fail(ErrorCode::out_of_range, "the input pipeline ended early");
        batch = std::move(*next);
      }
      const float l = session.step(batch, run).loss;
      if (run.trace && n == a.trace_last) {
        session.session().write_trace();
        if (!a.json) std::printf("%strace of steps %lld-%lld: %s\n", tty ? "\r" : "", (long long)a.trace_first,
                                 (long long)a.trace_last, a.trace.c_str());
      }
      return l;
    };

    if (!a.json)
      std::printf("training %s (%lld parameters) on Fashion-MNIST: %d epochs of %lld steps, batch %d, %s lr %g\n",
                  a.model.c_str(), (long long)parameters, a.epochs, (long long)steps, a.batch, a.optimizer.c_str(), a.lr);
    double total_seconds = 0;
    // TensorBoard's scalars: every kLogEvery steps the mean loss and the rate over them.
    constexpr int64_t kLogEvery = 20;
    double logged_loss = 0;
    int64_t logged_steps = 0;
    auto logged_since = std::chrono::steady_clock::now();
    int64_t stop_step = int64_t(a.stop_after_epochs > 0 ? std::min(a.epochs, a.stop_after_epochs) : a.epochs) * steps;
    if (a.stop_after_steps > 0) stop_step = std::min(stop_step, a.stop_after_steps);
    for (int epoch = int(from.epoch) + 1; epoch <= a.epochs && global_step < stop_step; ++epoch) {
      auto start = std::chrono::steady_clock::now();
      double loss_sum = 0;  // over this run's steps of the epoch (a resumed epoch: from its batch on)
      int64_t seen = 0;
      for (int64_t step = epoch == from.epoch + 1 ? from.elements + 1 : 1; step <= steps && global_step < stop_step;
           ++step) {
        int64_t b = std::min<int64_t>(a.batch, train_size - (step - 1) * a.batch);
        float l = train_step();
        global_step = session.global_step();
        loss_sum += double(l) * double(b);
        seen += b;
        logged_loss += double(l);
        if (++logged_steps == kLogEvery) {
          const auto now = std::chrono::steady_clock::now();
          const double rate = double(kLogEvery * a.batch) / std::chrono::duration<double>(now - logged_since).count();
          log.train(global_step, logged_loss / double(kLogEvery), rate, a.lr);
          logged_loss = 0, logged_steps = 0, logged_since = now;
        }
        double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        bool report = tty ? (step % 10 == 0 || step == steps) : (!a.json && (step % (steps / 5 + 1) == 0));
        if (report) {
          double rate = double(seen) / elapsed;
          std::string line = fmt::format("epoch {}/{}  step {}/{}  loss {:.4f}  {:.0f} examples/s  ETA {}",
                                         epoch, a.epochs, step, steps, loss_sum / double(seen), rate,
                                         train::clock_text(double(train_size - (step * a.batch)) / rate));
          if (tty) std::printf("\r%-90s", line.c_str());
          else std::printf("%s\n", line.c_str());
          std::fflush(stdout);
        }
      }
      if (global_step % steps != 0) break;  // stopped inside the epoch: no evaluation
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      total_seconds += seconds;
      evaluation->evaluate(session);
      if (a.json) {
        std::printf("{\"system\":\"troupe\",\"model\":\"%s\",\"epoch\":%d,\"batch\":%d,\"threads\":%d,\"prefetch\":%d,"
                    "\"global_step\":%lld,\"train_loss\":%.9g,\"test_accuracy\":%.4f,\"epoch_seconds\":%.3f,\"examples_per_s\":%.1f}\n",
                    a.model.c_str(), epoch, a.batch, a.threads > 0 ? a.threads : usable_cores(), a.prefetch,
                    (long long)global_step, loss_sum / double(seen), last_accuracy, seconds, double(seen) / seconds);
      } else {
        if (tty) std::printf("\r%-90s\r", "");
        std::printf("epoch %d: train loss %.4f, test accuracy %.4f, %.1f s (%.0f examples/s)\n", epoch,
                    loss_sum / double(seen), last_accuracy, seconds, double(seen) / seconds);
      }
      std::fflush(stdout);
    }
    session.close();  // the last checkpoint (a step saved already is not saved again); a stop's evaluation
    if (checkpoints) {
      // A run resumed at the step it stops at saves nothing new: the checkpoint it resumed from is the one.
      const std::string line = checkpoints->written() > 0
                                   ? checkpoints->summary(a.checkpoint_dir)
                                   : "no new checkpoint: the newest is " + checkpoints->newest() +
                                         ", the step this run ends at";
      if (a.json) std::fprintf(stderr, "troupe-fashion-mnist: %s\n", line.c_str());
      else std::printf("checkpoints: %s\n", line.c_str());
    }
    if (global_step < int64_t(a.epochs) * steps) {
      // Stopped inside the training: evaluated at the close (a cluster run's examples compare with this).
      if (a.json)
        std::printf("{\"system\":\"troupe\",\"model\":\"%s\",\"stopped\":true,\"global_step\":%lld,\"batch\":%d,"
                    "\"test_accuracy\":%.4f}\n",
                    a.model.c_str(), (long long)global_step, a.batch, last_accuracy);
      std::printf("stopped at step %lld (epoch %lld, batch %lld), test accuracy %.4f\n", (long long)global_step,
                  (long long)(global_step / steps + 1), (long long)(global_step % steps), last_accuracy);
      log.finish(fmt::format("stopped at step {} (epoch {}, batch {}), test accuracy {:.4f}", global_step,
                             global_step / steps + 1, global_step % steps, last_accuracy));
      return 0;  // the Prefetcher, still reading ahead, is stopped by its destructor
    }
    if (prefetcher) prefetcher->join();  // the pipeline's error, if it had one
    if (!a.json)
      std::printf("done: %s, %d epochs in %.1f s, test accuracy %.4f\n", a.model.c_str(), a.epochs, total_seconds,
                  last_accuracy);
    log.finish(fmt::format("done: {} epoch(s) in {:.1f} s, test accuracy {:.4f}", a.epochs, total_seconds, last_accuracy));
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-fashion-mnist: %s\n", e.what());
    return 1;
  }
}
