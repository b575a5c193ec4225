// The input pipeline of troupe-fashion-mnist on its own: one epoch of the Fashion-MNIST
// training files streamed, shuffled through a buffer and batched, with no training step;
// reports examples/s, the rate a Prefetcher can feed at most.
#include <chrono>
#include <cstdio>
#include <string>

#include "bench/flags.hpp"
#include "ops/data/idx.hpp"
#include "ops/data/pipeline.hpp"

namespace troupe::bench {

int pipeline_main(int argc, char** argv) {
  CommonFlags common{.steps = 3, .warmup = 0};
  std::string dir = data::kFashionMnistDir;
  int64_t batch = 64, buffer = 10000;
  parse_flags(argc, argv, common, [&](const std::string& k, const std::function<std::string()>& value) {
    if (k == "--data") dir = value();
    else if (k == "--batch") batch = std::stoll(value());
    else if (k == "--shuffle-buffer") buffer = std::stoll(value());
    else return false;
    return true;
  });
  auto files = data::fashion_mnist_files(dir, data::Split::train);
  auto pipeline = data::Pipeline::from_idx(files.first, files.second).shuffle(buffer, 1).batch(batch);
  for (int run = 0; run < common.steps; ++run) {
    auto start = std::chrono::steady_clock::now();
    int64_t examples = 0;
    auto it = pipeline.begin();
    while (auto b = it->next()) examples += (*b)[0].shape()[0];
    double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (common.json)
      std::printf("{\"system\":\"troupe\",\"benchmark\":\"pipeline\",\"batch\":%lld,\"shuffle_buffer\":%lld,"
                  "\"examples\":%lld,\"seconds\":%.3f,\"examples_per_s\":%.0f}\n",
                  (long long)batch, (long long)buffer, (long long)examples, s, double(examples) / s);
    else
      std::printf("pipeline: %lld examples in %.3f s, %.0f examples/s (batch %lld, shuffle buffer %lld)\n",
                  (long long)examples, s, double(examples) / s, (long long)batch, (long long)buffer);
  }
  return 0;
}

}  // namespace troupe::bench
