// troupe-bench: Troupe's benchmark binaries behind one command (CLI11; `troupe-bench --help`,
// `troupe-bench SUBCOMMAND --help` lists a benchmark's options and defaults).
//   troupe-bench executor --shape chain|fanout|random --nodes N --steps S [--json]
//   troupe-bench convnet --model alexnet|overfeat|vgg|googlenet --batch N --device cpu|gpu
//                        --steps S --warmup W [--json]
//   troupe-bench loop --iterations N [--parallel 1,10] [--body trivial,independent] [--devices 1,2] [--json]
//   troupe-bench pipeline [--data DIR] [--batch N] [--shuffle-buffer N] [--steps S] [--json]
//   troupe-bench checkpoint --dir DIR [--mib M] [--tensors N] [--shards N] [--steps S] [--json]
//   troupe-bench checkpoint --train --dir DIR [--save-every N] [--other-state-mib M] [--steps S] [--warmup W] [--json]
//   troupe-bench transfer [--sizes 4K,64K,1M,16M,256M] [--seconds S] [--chunk 4M] [--window 16]
//                         [--hosts NS=ADDR,NS=ADDR] [--json]
//   troupe-bench cluster [--size 512] [--layers 8] [--steps S] [--warmup W] [--threads T] [--float16] [--json]
//   troupe-bench allreduce [--procs 2,3,4] [--mib 1,16,64] [--steps S] [--warmup W] [--float16]
//                          [--hosts NS=ADDR,...] [--json]
//   troupe-bench cores [--cpus 0,1] [--rounds N] [--batches B] [--json]
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

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
int cores_main(int argc, char** argv);
}

int main(int argc, char** argv) {
  troupe::bound_openmp_spinning(argv);  // as the programs people run do
  struct Benchmark {
    const char* name;
    const char* what;
    int (*run)(int, char**);
  };
  const Benchmark benchmarks[] = {
      {"executor", "the executor's cost per node: graphs of scalar adds", troupe::bench::executor_main},
      {"convnet", "training steps of AlexNet, Overfeat, VGG-A or GoogLeNet", troupe::bench::convnet_main},
      {"loop", "the cost of a while loop's iteration", troupe::bench::loop_main},
      {"pipeline", "the input pipeline over Fashion-MNIST", troupe::bench::pipeline_main},
      {"checkpoint", "checkpoint save and restore, or training during saves", troupe::bench::checkpoint_main},
      {"transfer", "bytes between two processes: raw TCP, the data path and CAF", troupe::bench::transfer_main},
      {"cluster", "a graph over two troupe-node processes", troupe::bench::cluster_main},
      {"allreduce", "ring all-reduce among N processes of this program", troupe::bench::allreduce_main},
      {"cores", "a cache line's round trip between two CPUs", troupe::bench::cores_main},
  };
  // The subcommand is chosen here; its own options (and its --help) are its benchmark's, parsed
  // by the benchmark's own CLI11 command line.
  CLI::App app{"troupe-bench: Troupe's benchmarks, one subcommand each (troupe-bench SUBCOMMAND --help for its options)"};
  app.require_subcommand(0, 1);  // an unknown name is then refused naming it
  for (const auto& b : benchmarks) app.add_subcommand(b.name, b.what)->prefix_command()->set_help_flag();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  for (const auto& b : benchmarks) {
    CLI::App* sub = app.get_subcommand(b.name);
    if (!sub->parsed()) continue;
    std::vector<std::string> args{std::string("troupe-bench ") + b.name};
    for (auto& a : sub->remaining()) args.push_back(a);
    std::vector<char*> pointers;
    for (auto& a : args) pointers.push_back(a.data());
    pointers.push_back(nullptr);
    try {
      return b.run(int(args.size()), pointers.data());
    } catch (const std::exception& e) {
      std::fprintf(stderr, "troupe-bench %s: %s\n", b.name, e.what());
      return 1;
    }
  }
  std::fprintf(stderr, "%s", app.help().c_str());  // no subcommand
  return 2;
}
