// Checkpoints: how fast a Saver saves and restores, and what a save in the background costs a
// training step.
//   troupe-bench checkpoint --dir DIR [--mib 256] [--tensors 8] [--shards 1] [--steps 3] [--json]
//     saves --tensors float32 variables adding up to --mib MiB with Saver::save (data files,
//     crc32c, fsync, publish) --steps times, and restores each checkpoint after dropping its
//     files from the page cache; reports GB/s (median). bench/peers/compare_checkpoint.sh runs
//     dd and torch.save/torch.load on the same bytes beside it.
//   troupe-bench checkpoint --train --dir DIR [--steps 200] [--warmup 20] [--json]
//     the Fashion-MNIST CNN of troupe-fashion-mnist (synthetic batches of 64): the median step
//     time without a save, and of the steps that ran entirely while a background save
//     (Saver::save_async of the model and its momentum slots, one after another) was writing.
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "actors/saver.hpp"
#include "actors/session.hpp"
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
  Saver saver(session, {.max_to_keep = 1});
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
  std::filesystem::remove_all(dir + "/ckpt-" + std::to_string(common.steps));
  return 0;
}

int training(const CommonFlags& common, const std::string& dir) {
  auto root = Scope::root();
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
  for (int i = 0; i < common.warmup; ++i) session.run({}, {}, {train});
  Saver saver(session, {.max_to_keep = 2});
  std::vector<double> quiet, during;
  for (int i = 0; i < common.steps; ++i) {
    auto t = Clock::now();
    session.run({}, {}, {train});
    quiet.push_back(seconds_since(t));
  }
  int64_t saves = 0;
  std::future<std::string> pending = saver.save_async(dir, ++saves);
  while (int(during.size()) < common.steps) {
    if (pending.wait_for(std::chrono::seconds(0)) == std::future_status::ready) {
      pending.get();
      pending = saver.save_async(dir, ++saves);
    }
    auto t = Clock::now();
    session.run({}, {}, {train});
    double s = seconds_since(t);
    // Only steps that ran entirely while the save was writing count.
    if (pending.wait_for(std::chrono::seconds(0)) != std::future_status::ready) during.push_back(s);
  }
  pending.get();
  auto q = summarize(quiet), d = summarize(during);
  if (common.json)
    std::printf("{\"system\":\"troupe\",\"benchmark\":\"checkpoint_train\",\"model\":\"cnn\",\"batch\":64,"
                "\"median_step_ms\":%.3f,\"median_step_ms_during_save\":%.3f,\"saves\":%lld,\"ratio\":%.3f}\n",
                q.median * 1e3, d.median * 1e3, (long long)saves, d.median / q.median);
  else
    std::printf("checkpoint --train: CNN step %.2f ms without a save, %.2f ms during a background save "
                "(%.1f%%; %lld saves, %d steps each)\n",
                q.median * 1e3, d.median * 1e3, 100 * (d.median / q.median - 1), (long long)saves, common.steps);
  return 0;
}

}  // namespace

int checkpoint_main(int argc, char** argv) {
  CommonFlags common{.steps = 0, .warmup = 20};
  std::string dir;
  int64_t mib = 256;
  int tensors = 8, shards = 1;
  bool train = false;
  parse_flags(argc, argv, common, [&](const std::string& k, const std::function<std::string()>& value) {
    if (k == "--dir") dir = value();
    else if (k == "--mib") mib = std::stoll(value());
    else if (k == "--tensors") tensors = std::stoi(value());
    else if (k == "--shards") shards = std::stoi(value());
    else if (k == "--train") train = true;
    else return false;
    return true;
  });
  TROUPE_CHECK_ARG(!dir.empty(), "checkpoint needs --dir DIR (the checkpoints are written there)");
  TROUPE_CHECK_ARG(mib > 0 && tensors > 0 && shards > 0, "--mib, --tensors and --shards must be positive");
  if (common.steps == 0) common.steps = train ? 200 : 3;
  return train ? training(common, dir) : throughput(common, dir, mib, tensors, shards);
}

}  // namespace troupe::bench
