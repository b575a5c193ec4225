// The input pipeline of troupe-fashion-mnist on its own: one epoch of the Fashion-MNIST
// training files streamed, shuffled through a buffer and batched, with no training step;
// reports examples/s, the rate a Prefetcher can feed at most.
#include <chrono>
#include <cstdio>
#include <string>

#include "apps/cli_checks.hpp"
#include "bench/flags.hpp"
#include "ops/data/idx.hpp"
#include "ops/data/pipeline.hpp"

namespace troupe::bench {

int pipeline_main(int argc, char** argv) {
  CommonFlags common{.steps = 3, .warmup = 0};
  std::string dir = data::kFashionMnistDir;
  int64_t batch = 64, buffer = 10000;
  CLI::App app{"troupe-bench pipeline: the input pipeline's examples/s over Fashion-MNIST"};
  add_common_flags(app, common);
  app.add_option("--data", dir, "the Fashion-MNIST folder")->check(CLI::ExistingDirectory);
  app.add_option("--batch", batch, "examples per batch")->check(troupe::cli::positive);
  app.add_option("--shuffle-buffer", buffer, "the shuffle buffer's examples")->check(troupe::cli::positive);
  if (auto done = parse_command_line(app, argc, argv)) return *done;
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
