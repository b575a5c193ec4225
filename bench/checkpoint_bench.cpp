// Checkpoints: how fast a Saver saves and restores, and what a save in the background costs a
// training step.
//   troupe-bench checkpoint --dir DIR [--mib 256] [--tensors 8] [--shards 1] [--steps 3] [--json]
//     saves --tensors float32 variables adding up to --mib MiB with Saver::save (data files,
//     crc32c, fsync, publish) --steps times, and restores each checkpoint after dropping its
//     files from the page cache; reports GB/s (median). bench/peers/compare_checkpoint.sh runs
//     dd and torch.save/torch.load on the same bytes beside it.
//   troupe-bench checkpoint --train --dir DIR [--save-every 10] [--other-state-mib 0] [--steps 200]
//                           [--warmup 20] [--json]
//     the Fashion-MNIST CNN of troupe-fashion-mnist (synthetic batches of 64) with a background
//     save (Saver::save_async of the model, its momentum slots and M MiB of other state) started
//     every N steps: the median time of the steps that start while a save is in flight against
//     that of the others, at least S of each, from one run.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "actors/state/saver.hpp"
#include "actors/session.hpp"
#include "apps/cli_checks.hpp"
#include "bench/flags.hpp"
#include "ops/all.hpp"
#include "ops/layers/layers.hpp"

namespace troupe::bench {
namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Drops a checkpoint's files from the page cache, so a restore reads the disk, not memory.
void drop_from_page_cache(const std::string& path) {
  for (auto& f : std::filesystem::directory_iterator(path)) {
    int fd = ::open(f.path().c_str(), O_RDONLY);
    if (fd < 0) continue;
    ::fdatasync(fd);
    ::posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);
    ::close(fd);
  }
}

int throughput(const CommonFlags& common, const std::string& dir, int64_t mib, int tensors, int shards) {
  auto root = Scope::root();
  const int64_t n = mib * 1024 * 1024 / 4 / tensors;
  std::vector<Output> inits;
  for (int i = 0; i < tensors; ++i) {
    auto v = ops::variable(root.with_op_name("var_" + std::to_string(i)), {n}, DType::float32);
    inits.push_back(ops::assign(root, v, ops::random_uniform(root, {n}, DType::float32, 0, 1, {.seed = i + 1})));
  }
  Session session(root, {.threads = common.threads, .num_param_shards = shards});
  session.run({}, {}, {ops::group(root, inits)});
  // Every checkpoint is kept (max_to_keep 0) and removed after its restore, untimed: dd, which
  // the save is held against, writes its bytes and removes nothing either.
  Saver saver(session, {.max_to_keep = 0});
  const double bytes = double(n) * 4 * tensors;
  std::vector<double> saves, restores;
  for (int r = 0; r < common.steps; ++r) {
    auto t = Clock::now();
    std::string path = saver.save(dir, r + 1);
    saves.push_back(seconds_since(t));
    drop_from_page_cache(path);
    t = Clock::now();
    saver.restore(path);
    restores.push_back(seconds_since(t));
    std::filesystem::remove_all(path);
  }
  auto s = summarize(saves), l = summarize(restores);
  if (common.json)
    std::printf("{\"system\":\"troupe\",\"benchmark\":\"checkpoint\",\"bytes\":%.0f,\"tensors\":%d,\"shards\":%d,"
                "\"save_gbps\":%.3f,\"restore_gbps\":%.3f,\"save_s\":%.3f,\"restore_s\":%.3f}\n",
                bytes, tensors, shards, bytes / s.median / 1e9, bytes / l.median / 1e9, s.median, l.median);
  else
    std::printf("checkpoint: %.0f MiB in %d variables on %d shard(s): save %.3f GB/s (%.3f s), restore %.3f GB/s "
                "(%.3f s), medians of %d\n",
                bytes / 1048576, tensors, shards, bytes / s.median / 1e9, s.median, bytes / l.median / 1e9,
                l.median, common.steps);
  return 0;
}

int training(const CommonFlags& common, const std::string& dir, int64_t ballast_mib, int every) {
  auto root = Scope::root();
  // Other state the checkpoint holds besides the model (an embedding table, a second model):
  // it makes a save last many steps, so that steps in the middle of a save are measured.
  Output ballast_init;
  if (ballast_mib > 0) {
    const int64_t n = ballast_mib * 1048576 / 4;
    auto b = ops::variable(root.with_op_name("ballast"), {n}, DType::float32, {.trainable = false});
    ballast_init = ops::assign(root, b, ops::random_uniform(root, {n}, DType::float32, 0, 1, {.seed = 3}));
  }
  auto images = ops::random_uniform(root, {64, 1, 28, 28}, DType::float32, 0, 1, {.seed = 1});
  auto labels = ops::cast(root, ops::random_uniform(root, {64}, DType::float32, 0, 10, {.seed = 2}), DType::int32);
  layers::Sequential model(root, 1);
  model.add(layers::Conv2D{.filters = 32, .kernel = 5, .activation = layers::Activation::relu})
      .add(layers::MaxPool2D{.size = 2})
      .add(layers::Conv2D{.filters = 64, .kernel = 5, .activation = layers::Activation::relu})
      .add(layers::MaxPool2D{.size = 2})
      .add(layers::Flatten{})
      .add(layers::Dense{.units = 1024, .activation = layers::Activation::relu})
      .add(layers::Dense{.units = 10});
  auto loss = model.loss(model(images, layers::Mode::training), labels);
  auto train = Optimizer::momentum(0.01, 0.9).minimize(root, loss);
  Session session(root, {.threads = common.threads});
  session.run({}, {}, {model.initializer()});
  if (ballast_init) session.run({}, {}, {ballast_init});
  for (int i = 0; i < common.warmup; ++i) session.run({}, {}, {train});
  Saver saver(session, {.max_to_keep = 2});
  // One run, steps and saves interleaved as in training: a save every `every` steps, in the
  // background. A step that starts while a save is in flight counts as "during" (it also pays
  // for the copies its updates make of the buffers the save still holds); the others as quiet.
  std::vector<double> quiet, during;
  std::future<std::string> pending;
  int64_t saves = 0;
  for (int i = 0; int(during.size()) < common.steps || int(quiet.size()) < common.steps; ++i) {
    if (pending.valid() && pending.wait_for(std::chrono::seconds(0)) == std::future_status::ready) pending.get();
    if (!pending.valid() && i % every == 0) pending = saver.save_async(dir, ++saves);
    const bool saving = pending.valid();
    auto t = Clock::now();
    session.run({}, {}, {train});
    (saving ? during : quiet).push_back(seconds_since(t));
  }
  if (pending.valid()) pending.get();
  auto q = summarize(quiet), d = summarize(during);
  if (common.json)
    std::printf("{\"system\":\"troupe\",\"benchmark\":\"checkpoint_train\",\"model\":\"cnn\",\"batch\":64,"
                "\"other_state_mib\":%lld,\"save_every\":%d,\"median_step_ms\":%.3f,\"median_step_ms_during_save\":%.3f,"
                "\"steps\":%zu,\"steps_during_save\":%zu,\"saves\":%lld,\"ratio\":%.3f}\n",
                (long long)ballast_mib, every, q.median * 1e3, d.median * 1e3, quiet.size(), during.size(),
                (long long)saves, d.median / q.median);
  else
    std::printf("checkpoint --train: CNN step %.2f ms without a save (%zu steps), %.2f ms during a background save "
                "(%zu steps) of the model and %lld MiB of other state, a save every %d steps: %+.1f%% (%lld saves)\n",
                q.median * 1e3, quiet.size(), d.median * 1e3, during.size(), (long long)ballast_mib, every,
                100 * (d.median / q.median - 1), (long long)saves);
  return 0;
}

}  // namespace

int checkpoint_main(int argc, char** argv) {
  CommonFlags common{.steps = 0, .warmup = 20};
  std::string dir;
  int64_t mib = 256;
  int tensors = 8, shards = 1;
  bool train = false;
  int64_t other_mib = 0;
  int every = 10;
  CLI::App app{"troupe-bench checkpoint: save and restore throughput, or training steps during saves (--train)"};
  add_common_flags(app, common);
  app.get_option("--steps")->description("timed saves, or with --train training steps (0: 3, or 200 with --train)");
  app.add_option("--dir", dir, "where the checkpoints are written")->required();
  app.add_option("--mib", mib, "MiB of variables saved")->check(troupe::cli::positive);
  app.add_option("--tensors", tensors, "variables they are split into")->check(troupe::cli::positive);
  app.add_option("--shards", shards, "parameter shards holding them")->check(troupe::cli::positive);
  app.add_flag("--train", train, "time training steps while checkpoints are saved");
  app.add_option("--other-state-mib", other_mib, "with --train: MiB of other variables saved too")
      ->check(troupe::cli::non_negative);
  app.add_option("--save-every", every, "with --train: steps between saves")->check(troupe::cli::positive);
  if (auto done = parse_command_line(app, argc, argv)) return *done;
  if (common.steps == 0) common.steps = train ? 200 : 3;
  return train ? training(common, dir, other_mib, every) : throughput(common, dir, mib, tensors, shards);
}

}  // namespace troupe::bench
