// troupe-fashion-mnist: trains a LeNet-style CNN or an MLP on Fashion-MNIST with Troupe's C++
// API, evaluates on the 10,000 test images after each epoch, and prints a summary. The training
// input is a data::Pipeline (the IDX files streamed each epoch, shuffled through a buffer,
// batched) that a Prefetcher runs on its own thread into a queue the graph dequeues from, so
// reading overlaps the steps (--prefetch 0: read in the training loop and fed instead). The
// test input is read inside the graph (DatasetBatches).
//
// With --checkpoint-dir DIR it saves a checkpoint (actors/saver.hpp: weights, optimizer slots;
// the global step is the checkpoint's step) every --save-every-steps steps and at the end, and
// a run that finds a checkpoint in DIR resumes from it: the restored weights, and the input
// from the same place in the same sequence (the epoch and batch follow from the global step,
// since every epoch has the same number of batches, and each epoch's order from (seed, epoch)).
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <future>
#include <string>
#include <thread>

#include <optional>

#include "actors/prefetch.hpp"
#include "actors/saver.hpp"
#include "actors/session.hpp"
#include "devices/cpu_threads.hpp"
#include "ops/all.hpp"
#include "ops/data/batch_reader.hpp"
#include "ops/data/idx.hpp"
#include "ops/data/pipeline.hpp"
#include "ops/layers/layers.hpp"

using namespace troupe;

namespace {

struct Args {
  std::string model = "cnn";
  int epochs = 3;
  int batch = 64;
  std::string optimizer = "momentum";
  double lr = 0.01;
  double momentum = 0.9;
  int64_t seed = 1;
  int threads = 0;
  bool json = false;
  std::string data = "/usr/share/datasets/fashion-mnist";
  int prefetch = 8;               // batches read ahead; 0: read in the training loop
  // Examples; the whole training set by default, so each epoch is a uniform reshuffle as in
  // PyTorch's recipe (bench/peers/fashion_mnist_torch.py). A smaller buffer shuffles only
  // locally, which lost a point of test accuracy (docs/performance.md, issue 12).
  int64_t shuffle_buffer = 60000;
  std::string checkpoint_dir;   // empty: no checkpoints
  int64_t save_every_steps = -1;  // -1: 500 with a checkpoint dir; 0: only at the end
  int stop_after_epochs = 0;      // 0: run every epoch; N: save and stop after epoch N
  int64_t stop_after_steps = 0;   // 0: no stop; N: save and stop at global step N (mid-epoch too)
};

void usage() {
  std::fprintf(stderr,
               "usage: troupe-fashion-mnist [--model cnn|mlp] [--epochs N] [--batch N]\n"
               "         [--optimizer sgd|momentum|adam|adagrad|rmsprop] [--lr X] [--momentum X]\n"
               "         [--seed N] [--threads N] [--data DIR] [--prefetch BATCHES] [--shuffle-buffer N]\n"
               "         [--checkpoint-dir DIR] [--save-every-steps N] [--stop-after-epochs N]\n"
               "         [--stop-after-steps N] [--json]\n");
}

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    std::string k = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) fail(ErrorCode::invalid_argument, "{} needs a value", k);
      return argv[++i];
    };
    if (k == "--model") a.model = value();
    else if (k == "--epochs") a.epochs = std::stoi(value());
    else if (k == "--batch") a.batch = std::stoi(value());
    else if (k == "--optimizer") a.optimizer = value();
    else if (k == "--lr") a.lr = std::stod(value());
    else if (k == "--momentum") a.momentum = std::stod(value());
    else if (k == "--seed") a.seed = std::stoll(value());
    else if (k == "--threads") a.threads = std::stoi(value());
    else if (k == "--data") a.data = value();
    else if (k == "--prefetch") a.prefetch = std::stoi(value());
    else if (k == "--shuffle-buffer") a.shuffle_buffer = std::stoll(value());
    else if (k == "--checkpoint-dir") a.checkpoint_dir = value();
    else if (k == "--save-every-steps") a.save_every_steps = std::stoll(value());
    else if (k == "--stop-after-epochs") a.stop_after_epochs = std::stoi(value());
    else if (k == "--stop-after-steps") a.stop_after_steps = std::stoll(value());
    else if (k == "--json") a.json = true;
    else if (k == "--help" || k == "-h") {
      usage();
      std::exit(0);
    } else {
      fail(ErrorCode::invalid_argument, "unknown option '{}' (--help lists them)", k);
    }
  }
  if (a.model != "cnn" && a.model != "mlp")
    fail(ErrorCode::invalid_argument, "--model must be cnn or mlp, not '{}'", a.model);
  if (a.epochs < 1 || a.batch < 1) fail(ErrorCode::invalid_argument, "--epochs and --batch must be positive");
  if (a.prefetch < 0 || a.shuffle_buffer < 1)
    fail(ErrorCode::invalid_argument, "--prefetch must be 0 or more and --shuffle-buffer positive");
  if (a.save_every_steps < -1 || a.stop_after_epochs < 0 || a.stop_after_steps < 0)
    fail(ErrorCode::invalid_argument, "--save-every-steps and the --stop-after options must not be negative");
  if (a.save_every_steps == -1) a.save_every_steps = a.checkpoint_dir.empty() ? 0 : 500;
  if (a.save_every_steps > 0 && a.checkpoint_dir.empty())
    fail(ErrorCode::invalid_argument, "--save-every-steps needs --checkpoint-dir");
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

std::string file(const std::string& dir, const char* stem) {
  std::string gz = dir + "/" + stem + ".gz";
  return ::access(gz.c_str(), R_OK) == 0 ? gz : dir + "/" + stem;
}

std::string clock_text(double seconds) {
  int s = int(std::lround(std::max(0.0, seconds)));
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

}  // namespace

int main(int argc, char** argv) {
  troupe::bound_openmp_spinning(argv);  // another program on the same cores must not stall it
  try {
    Args a = parse(argc, argv);
    const bool tty = ::isatty(STDOUT_FILENO) && !a.json;
    auto root = Scope::root();
    auto train_files = data::fashion_mnist_files(a.data, data::Split::train);
    auto pipeline = data::Pipeline::from_idx(train_files.first, train_files.second)
                        .shuffle(a.shuffle_buffer, uint64_t(a.seed))
                        .batch(a.batch)
                        .repeat(a.epochs);
    const std::vector<PartialShape> batch_shapes = {PartialShape{-1, 1, 28, 28}, PartialShape{-1}};
    std::vector<Output> train_in;
    std::optional<ops::Queue> queue;
    if (a.prefetch > 0) {
      queue = ops::Queue::fifo(root.sub("train_data"), {DType::float32, DType::int32}, batch_shapes,
                               {.capacity = a.prefetch, .shared_name = "fashion_mnist_train"});
      train_in = queue->dequeue(root.sub("train_data"));
    } else {
      train_in = {ops::placeholder(root.with_op_name("train_images"), DType::float32, batch_shapes[0]),
                  ops::placeholder(root.with_op_name("train_labels"), DType::int32, batch_shapes[1])};
    }
    const int64_t test_batch = 1000;
    auto test_in = ops::dataset_batches(
        root.sub("test_data"), {.images_path = file(a.data, "t10k-images-idx3-ubyte"),
                                .labels_path = file(a.data, "t10k-labels-idx1-ubyte"),
                                .batch_size = test_batch});
    layers::Sequential model(root, a.seed);
    build_model(model, a.model);
    auto logits = model(train_in[0], layers::Mode::training);
    auto loss = model.loss(logits, train_in[1]);
    auto train = make_optimizer(a).minimize(root, loss);
    auto test_logits = model(test_in[0], layers::Mode::inference);
    auto correct = ops::sum(root, ops::cast(root, ops::equal(root, ops::argmax(root, test_logits, -1),
                                                             ops::cast(root, test_in[1], DType::int64)),
                                            DType::float32));

    SessionOptions options;
    options.threads = a.threads;
    Session session(root, options);
    session.run({}, {}, {model.initializer()});
    // Build both executables (the test reader loads its files) before any epoch is timed.
    if (queue) session.prepare({}, {loss}, {train});
    else session.prepare({train_in[0], train_in[1]}, {loss}, {train});
    session.prepare({}, {correct});

    const int64_t train_size = 60000, test_size = 10000;
    const int64_t steps = (train_size + a.batch - 1) / a.batch;
    // The steps done so far; a resumed run starts at (epoch, batch) = divmod(global_step, steps).
    int64_t global_step = 0;
    std::optional<Saver> saver;
    if (!a.checkpoint_dir.empty()) {
      saver.emplace(session, SaverOptions{.max_to_keep = 5});
      if (auto latest = latest_checkpoint(a.checkpoint_dir)) {
        global_step = saver->restore(*latest).global_step;
        std::printf("resumed from step %lld (epoch %lld, batch %lld) of %s\n", (long long)global_step,
                    (long long)(global_step / steps + 1), (long long)(global_step % steps), latest->c_str());
        std::fflush(stdout);
      }
    }
    const data::Position from{.epoch = global_step / steps, .elements = global_step % steps};
    if (from.epoch >= a.epochs) {
      std::printf("nothing left to train: the checkpoint is at step %lld, the end of epoch %d\n", (long long)global_step,
                  a.epochs);
      return 0;
    }
    std::optional<Prefetcher> prefetcher;
    std::unique_ptr<data::Iterator> batches;
    if (queue) prefetcher.emplace(session, *queue, pipeline, from);
    else batches = pipeline.begin(from);
    // Saves in the background (training goes on while it writes); one save at a time, and each
    // save's error surfaces at the next save or at the end.
    std::future<std::string> saving;
    int64_t saved_step = global_step;  // the newest step in the checkpoint dir (when resumed)
    auto save = [&](bool wait) {
      if (saving.valid()) saving.get();
      if (global_step != saved_step || !latest_checkpoint(a.checkpoint_dir))
        saving = saver->save_async(a.checkpoint_dir, global_step);
      saved_step = global_step;
      if (wait && saving.valid()) saving.get();
    };
    // One training step on the next batch, from the queue or read here and fed.
    auto train_step = [&]() -> float {
      if (prefetcher) return session.run({}, {loss}, {train})[0].scalar_value<float>();
      auto batch = batches->next();
      if (!batch) fail(ErrorCode::out_of_range, "the input pipeline ended early");
      return session.run({{train_in[0], (*batch)[0]}, {train_in[1], (*batch)[1]}}, {loss}, {train})[0]
          .scalar_value<float>();
    };

    if (!a.json)
      std::printf("training %s (%lld parameters) on Fashion-MNIST: %d epochs of %lld steps, batch %d, %s lr %g\n",
                  a.model.c_str(), (long long)model.num_parameters(), a.epochs, (long long)steps, a.batch,
                  a.optimizer.c_str(), a.lr);
    double total_seconds = 0, last_accuracy = 0;
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
        if (!std::isfinite(l)) fail(ErrorCode::aborted, "the loss diverged ({}) at epoch {} step {}", l, epoch, step);
        ++global_step;
        if (a.save_every_steps > 0 && global_step % a.save_every_steps == 0) save(false);
        loss_sum += double(l) * double(b);
        seen += b;
        double elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        bool report = tty ? (step % 10 == 0 || step == steps) : (!a.json && (step % (steps / 5 + 1) == 0));
        if (report) {
          double rate = double(seen) / elapsed;
          std::string line = fmt::format("epoch {}/{}  step {}/{}  loss {:.4f}  {:.0f} examples/s  ETA {}",
                                         epoch, a.epochs, step, steps, loss_sum / double(seen), rate,
                                         clock_text(double(train_size - (step * a.batch)) / rate));
          if (tty) std::printf("\r%-90s", line.c_str());
          else std::printf("%s\n", line.c_str());
          std::fflush(stdout);
        }
      }
      if (global_step % steps != 0) break;  // stopped inside the epoch: no evaluation
      double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      total_seconds += seconds;
      double hits = 0;
      for (int64_t i = 0; i < test_size / test_batch; ++i) hits += session.run({correct})[0].scalar_value<float>();
      last_accuracy = hits / double(test_size);
      if (a.json) {
        std::printf("{\"system\":\"troupe\",\"model\":\"%s\",\"epoch\":%d,\"batch\":%d,\"threads\":%d,\"prefetch\":%d,"
                    "\"global_step\":%lld,\"train_loss\":%.9g,\"test_accuracy\":%.4f,\"epoch_seconds\":%.3f,\"examples_per_s\":%.1f}\n",
                    a.model.c_str(), epoch, a.batch,
                    a.threads > 0 ? a.threads : usable_cores(), a.prefetch,
                    (long long)global_step, loss_sum / double(seen),
                    last_accuracy, seconds,
                    double(seen) / seconds);
      } else {
        if (tty) std::printf("\r%-90s\r", "");
        std::printf("epoch %d: train loss %.4f, test accuracy %.4f, %.1f s (%.0f examples/s)\n", epoch,
                    loss_sum / double(seen), last_accuracy, seconds, double(seen) / seconds);
      }
      std::fflush(stdout);
    }
    if (saver) save(true);  // the end (or the stop); a step saved already is not saved again
    if (global_step < int64_t(a.epochs) * steps) {
      std::printf("stopped at step %lld (epoch %lld, batch %lld)\n", (long long)global_step,
                  (long long)(global_step / steps + 1), (long long)(global_step % steps));
      return 0;  // the Prefetcher, still reading ahead, is stopped by its destructor
    }
    if (prefetcher) prefetcher->join();  // the pipeline's error, if it had one
    if (!a.json)
      std::printf("done: %s, %d epochs in %.1f s, test accuracy %.4f\n", a.model.c_str(), a.epochs, total_seconds,
                  last_accuracy);
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-fashion-mnist: %s\n", e.what());
    return 1;
  }
}
