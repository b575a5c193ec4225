// troupe-bench: Troupe's benchmark binaries behind one command.
//   troupe-bench executor --shape chain|fanout|random --nodes N --steps S [--json]
//   troupe-bench convnet --model alexnet|overfeat|vgg|googlenet --batch N --device cpu|gpu
//                        --steps S --warmup W [--json]
//   troupe-bench loop --iterations N [--parallel 1,10] [--body trivial,independent] [--devices 1,2] [--json]
//   troupe-bench pipeline [--data DIR] [--batch N] [--shuffle-buffer N] [--steps S] [--json]
//   troupe-bench checkpoint --dir DIR [--mib M] [--tensors N] [--shards N] [--steps S] [--json]
//   troupe-bench checkpoint --train --dir DIR [--save-every N] [--other-state-mib M] [--steps S] [--warmup W] [--json]
//   troupe-bench transfer [--sizes 4K,64K,1M,16M,256M] [--seconds S] [--chunk 4M] [--window 16] [--json]
//   troupe-bench cluster [--size 512] [--layers 8] [--steps S] [--warmup W] [--threads T] [--float16] [--json]
//   troupe-bench allreduce [--procs 2,3,4] [--mib 1,16,64] [--steps S] [--warmup W] [--float16] [--json]
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "core/error.hpp"
#include "devices/cpu_threads.hpp"

namespace troupe::bench {
int executor_main(int argc, char** argv);
int convnet_main(int argc, char** argv);
int loop_main(int argc, char** argv);
int pipeline_main(int argc, char** argv);
int checkpoint_main(int argc, char** argv);
int transfer_main(int argc, char** argv);
int cluster_main(int argc, char** argv);
int allreduce_main(int argc, char** argv);
}

int main(int argc, char** argv) {
  troupe::bound_openmp_spinning(argv);  // as the programs people run do
  auto usage = [] {
    std::fprintf(stderr,
                 "usage: troupe-bench executor --shape chain|fanout|random --nodes N --steps S "
                 "[--warmup W] [--threads T] [--json]\n"
                 "       troupe-bench convnet --model alexnet|overfeat|vgg|googlenet [--batch N] "
                 "[--device cpu|gpu] [--steps S] [--warmup W] [--threads T] [--json]\n"
                 "       troupe-bench loop --iterations N [--parallel 1,10] [--body trivial,independent] [--devices 1,2] "
                 "[--steps S] [--warmup W] [--threads T] [--json]\n"
                 "       troupe-bench pipeline [--data DIR] [--batch N] [--shuffle-buffer N] [--steps S] [--json]\n"
                 "       troupe-bench checkpoint --dir DIR [--mib M] [--tensors N] [--shards N] [--steps S] [--json]\n"
                 "       troupe-bench checkpoint --train --dir DIR [--save-every N] [--other-state-mib M] [--steps S] [--warmup W] [--threads T] [--json]\n"
                 "       troupe-bench transfer [--sizes 4K,64K,1M,16M,256M] [--seconds S] [--chunk 4M] [--window 16] [--json]\n"
                 "       troupe-bench cluster [--size 512] [--layers 8] [--steps S] [--warmup W] [--threads T] [--float16] "
                 "[--node PATH] [--json]\n"
                 "       troupe-bench allreduce [--procs 2,3,4] [--mib 1,16,64] [--steps S] [--warmup W] [--float16] "
                 "[--chunk-kib K] [--json]\n");
    return 2;
  };
  if (argc < 2) return usage();
  try {
    if (std::strcmp(argv[1], "executor") == 0) return troupe::bench::executor_main(argc - 1, argv + 1);
    if (std::strcmp(argv[1], "convnet") == 0) return troupe::bench::convnet_main(argc - 1, argv + 1);
    if (std::strcmp(argv[1], "loop") == 0) return troupe::bench::loop_main(argc - 1, argv + 1);
    if (std::strcmp(argv[1], "pipeline") == 0) return troupe::bench::pipeline_main(argc - 1, argv + 1);
    if (std::strcmp(argv[1], "checkpoint") == 0) return troupe::bench::checkpoint_main(argc - 1, argv + 1);
    if (std::strcmp(argv[1], "transfer") == 0) return troupe::bench::transfer_main(argc - 1, argv + 1);
    if (std::strcmp(argv[1], "cluster") == 0) return troupe::bench::cluster_main(argc - 1, argv + 1);
    if (std::strcmp(argv[1], "allreduce") == 0) return troupe::bench::allreduce_main(argc - 1, argv + 1);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-bench: %s\n", e.what());
    return 1;
  }
  std::fprintf(stderr, "troupe-bench: unknown benchmark '%s'\n", argv[1]);
  return usage();
}
