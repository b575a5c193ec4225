// train_residual: a training program of one's own on train::TrainingSession, the same code on one
// process and on a cluster in every strategy (docs/api.md, "Training on a cluster from your own
// program").
//
// The model is a small residual network (a dense stem, one residual block whose branch is two
// dense layers added back to its input, a classifier) that learns a nonlinear rule over 8
// features. Its data is a CSV file it writes itself (4096 training rows, 1024 test rows, the same
// on every worker), read by a data::Pipeline: sharded by worker, shuffled, batched, read ahead.
// It checkpoints, resumes, evaluates the test rows every --eval-every steps and at the end,
// writes TensorBoard scalars with --logdir, and prints the job's progress.
//
//   train_residual                                          # one process, 300 steps
//   train_residual --checkpoint-dir ckpt --steps 600        # resumes from ckpt when it has one
//   troupe-launch --ps 1 --workers 2 -- train_residual --strategy sync --checkpoint-dir ckpt
//   TF_CONFIG='{"cluster": {...}, "task": {"type": "worker", "index": 0}}' train_residual --strategy async
//
// The chief (alone, or worker:0) exits 1 unless the test accuracy ends at --min-accuracy or above.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <stdexcept>
#include <string>

#include "ops/all.hpp"
#include "ops/data/pipeline.hpp"
#include "ops/layers/layers.hpp"
#include "train/cluster_config.hpp"
#include "train/hooks.hpp"
#include "train/training_session.hpp"

using namespace troupe;

namespace {

constexpr int64_t kFeatures = 8;

struct Flags {
  std::string cluster, task;  // --cluster FILE --task worker:K (troupe-launch gives both); else TF_CONFIG
  std::string strategy = "async";
  int backup_workers = 0;
  bool rejoin = false;
  int64_t steps = 300;
  int64_t batch = 32;
  std::string checkpoint_dir;
  int64_t save_every = 100;
  int64_t eval_every = 100;
  std::string logdir;
  double min_accuracy = 0.85;
};

Flags parse(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--cluster") f.cluster = value();
    else if (arg == "--task") f.task = value();
    else if (arg == "--strategy") f.strategy = value();
    else if (arg == "--backup-workers") f.backup_workers = std::stoi(value());
    else if (arg == "--rejoin") f.rejoin = true;
    else if (arg == "--steps") f.steps = std::stoll(value());
    else if (arg == "--batch") f.batch = std::stoll(value());
    else if (arg == "--checkpoint-dir") f.checkpoint_dir = value();
    else if (arg == "--save-every") f.save_every = std::stoll(value());
    else if (arg == "--eval-every") f.eval_every = std::stoll(value());
    else if (arg == "--logdir") f.logdir = value();
    else if (arg == "--min-accuracy") f.min_accuracy = std::stod(value());
    else throw std::invalid_argument("unknown option " + arg);
  }
  return f;
}

// The rule the network learns: class 1 where x0 * x1 + sin(2 x2) + x3^2 > 1.
void write_csv(const std::string& path, int64_t rows, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::ofstream out(path);
  for (int64_t r = 0; r < rows; ++r) {
    float x[kFeatures];
    for (float& v : x) v = normal(rng);
    const int label = x[0] * x[1] + std::sin(2 * x[2]) + x[3] * x[3] > 1.0f ? 1 : 0;
    for (float v : x) out << v << ',';
    out << label << '\n';
  }
  if (!out.flush()) throw std::runtime_error("cannot write " + path);
}

// Columns 0-7: the features (float32 [8]); column 8: the label (int32).
data::Pipeline read_csv(const std::string& path) {
  return data::Pipeline::from_csv(path, {.components = {{.first = 0, .count = kFeatures},
                                                        {.first = kFeatures, .count = 1, .dtype = DType::int32}}});
}

// A block that adds a two-layer branch back to its input: relu(x + dense(relu(dense(x)))).
class ResidualBlock final : public layers::Layer {
 public:
  explicit ResidualBlock(int64_t units)
      : first_(layers::Dense{.units = units, .activation = layers::Activation::relu}),
        second_(layers::Dense{.units = units}) {}
  const char* kind() const override { return "residual_block"; }

 protected:
  Output build(layers::Context& ctx, Output x) override {
    return ops::relu(ctx.scope(), add_(ctx, {x, second_(ctx, first_(ctx, x))}));
  }

 private:
  layers::DenseLayer first_, second_;
  layers::AddLayer add_;
};

// The model: its loss on the training placeholders, its accuracy on the evaluation ones (the
// same layers, in inference mode).
train::Model residual_model(const Scope& s) {
  layers::Model net(s, /*seed=*/7);
  auto stem = std::make_shared<layers::DenseLayer>(layers::Dense{.units = 64, .activation = layers::Activation::relu});
  auto block = std::make_shared<ResidualBlock>(64);
  auto head = std::make_shared<layers::DenseLayer>(layers::Dense{.units = 2});
  auto logits = [&](layers::Context ctx, Output x) { return (*head)(ctx, (*block)(ctx, (*stem)(ctx, x))); };

  auto x = ops::placeholder(s.with_op_name("x"), DType::float32, PartialShape{-1, kFeatures});
  auto y = ops::placeholder(s.with_op_name("y"), DType::int32, PartialShape{-1});
  auto loss = net.loss(logits(net.context(layers::Mode::training), x), y);

  auto test_x = ops::placeholder(s.with_op_name("test_x"), DType::float32, PartialShape{-1, kFeatures});
  auto test_y = ops::placeholder(s.with_op_name("test_y"), DType::int32, PartialShape{-1});
  auto predicted = ops::argmax(s, logits(net.context(layers::Mode::inference), test_x), -1);
  auto hits = ops::cast(s, ops::equal(s, predicted, ops::cast(s, test_y, DType::int64)), DType::float32);
  return {.loss = loss, .inputs = {x, y}, .metrics = {{"accuracy", ops::mean(s, hits)}}, .eval_inputs = {test_x, test_y}};
}

}  // namespace

int main(int argc, char** argv) {
  std::string train_csv, test_csv;
  int code = 0;
  try {
    const Flags f = parse(argc, argv);
    const train::ClusterConfig where = train::where_am_i(f.cluster, f.task);

    // Every process writes the same rows into files of its own.
    char dir[] = "/tmp/train_residual.XXXXXX";
    if (!::mkdtemp(dir)) throw std::runtime_error("cannot make a directory under /tmp");
    train_csv = std::string(dir) + "/train.csv", test_csv = std::string(dir) + "/test.csv";
    write_csv(train_csv, 4096, 1);
    write_csv(test_csv, 1024, 2);

    train::TrainingOptions options{.strategy = train::parse_strategy(f.strategy),
                                   .backup_workers = f.backup_workers,
                                   .last_step = f.steps,
                                   .checkpoint_dir = f.checkpoint_dir,
                                   .rejoin = f.rejoin};
    train::TrainingSession session(where, Optimizer::adam(0.003), residual_model, options);

    if (!f.logdir.empty()) session.add_hook(std::make_shared<train::TensorBoardHook>(f.logdir));
    session.add_hook(std::make_shared<train::ProgressHook>());
    std::shared_ptr<train::CheckpointHook> checkpoints;
    if (!f.checkpoint_dir.empty()) {
      checkpoints = std::make_shared<train::CheckpointHook>(train::CheckpointHook::every_steps(f.save_every));
      session.add_hook(checkpoints);
    }
    auto evaluation = std::make_shared<train::EvaluationHook>(train::EvaluationOptions{
        .every_steps = f.eval_every,
        .input = [&] { return read_csv(test_csv).batch(256).begin(); },
        .on_result = [&](int64_t step, const std::map<std::string, double>& m) {
          std::printf("step %lld: test accuracy %.4f\n", (long long)step, m.at("accuracy"));
        }});
    session.add_hook(evaluation);

    // This worker's shard, reshuffled each pass, resumed where its share of the steps left it.
    const int64_t shard = 4096 / where.num_workers();
    const int64_t batches_per_pass = (shard + f.batch - 1) / f.batch;
    auto input = read_csv(train_csv)
                     .shard(where.num_workers(), where.worker_index())
                     .shuffle(shard, 1 + uint64_t(where.worker_index()))
                     .batch(f.batch)
                     .repeat(-1)
                     .prefetch(2)
                     .begin(session.input_position(batches_per_pass));
    session.train(*input);

    if (session.is_chief()) {
      const double accuracy = evaluation->last().at("accuracy");
      std::printf("done: %s, global step %lld, test accuracy %.4f%s%s\n", train::name_of(session.strategy()),
                  (long long)session.global_step(), accuracy, checkpoints ? "; " : "",
                  checkpoints ? checkpoints->summary(f.checkpoint_dir).c_str() : "");
      if (accuracy < f.min_accuracy) {
        std::fprintf(stderr, "train_residual: test accuracy %.4f is below %.2f\n", accuracy, f.min_accuracy);
        code = 1;
      }
    } else {
      std::printf("%s: done at global step %lld\n", where.task_name().c_str(), (long long)session.global_step());
    }
    if (session.strategy() == train::Strategy::allreduce)
      std::printf("%s: weights fingerprint %016llx\n", where.task_name().c_str(),
                  (unsigned long long)session.weights_fingerprint());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "train_residual: %s\n", e.what());
    code = 1;
  }
  if (!train_csv.empty()) {
    std::remove(train_csv.c_str());
    std::remove(test_csv.c_str());
    ::rmdir(train_csv.substr(0, train_csv.rfind('/')).c_str());
  }
  return code;
}
