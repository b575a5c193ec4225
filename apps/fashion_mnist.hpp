#pragma once
// troupe-fashion-mnist's options and the pieces its single-process run (fashion_mnist.cpp) and
// its cluster runs (fashion_mnist_cluster.cpp) share.
#include <cstdint>
#include <optional>
#include <string>


#include "ops/layers/layers.hpp"
#include "train/cluster_config.hpp"
#include "ops/state/optimizer.hpp"

namespace troupe::app {

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
  std::string logdir;              // TensorBoard event files here; empty: none
  std::string report;              // report.html here; empty: LOGDIR/report.html with --logdir, else none
  std::string trace;               // a Chrome trace of steps trace_first..trace_last (this process's count)
  std::string trace_steps = "10-12";
  int64_t trace_first = 0, trace_last = 0;
  std::string data = "/usr/share/datasets/fashion-mnist";
  int prefetch = 8;  // batches read ahead; 0: read in the training loop
  // Examples; the whole training set by default, so each epoch is a uniform reshuffle as in
  // PyTorch's recipe (bench/peers/fashion_mnist_torch.py). A smaller buffer shuffles only
  // locally, which lost a point of test accuracy (docs/performance.md, "Fashion-MNIST training").
  int64_t shuffle_buffer = 60000;
  std::string checkpoint_dir;      // empty: no checkpoints
  std::string restore_from;        // a checkpoint of checkpoint_dir by name (ckpt-N); empty: the newest
  int64_t save_every_steps = -1;   // -1: 500 with a checkpoint dir; 0: only at the end
  int stop_after_epochs = 0;       // 0: run every epoch; N: save and stop after epoch N
  int64_t stop_after_steps = 0;    // 0: no stop; N: save and stop at global step N (mid-epoch too)
  // A cluster run (docs/cluster.md, "Training on a cluster").
  std::string cluster;             // --cluster: the spec's file; empty: TF_CONFIG, else one process
  std::string task;                // --task: this process's task, worker:K; empty: the spec's
  train::ClusterConfig where;      // what the two (or TF_CONFIG) say
  std::string mode = "async";      // async | sync | allreduce
  int backup_workers = 0;          // sync: m = workers - backup_workers gradients per step
  int64_t steps = 0;               // global steps to train; 0: epochs' worth for the whole job
  int delay_ms = 0;                // a straggler for tests and benchmarks: sleep before each step
  int delay_worker = -1;           // ... on this worker only (-1: the last one)
  int warmup_steps = 20;           // global steps before the timing starts
  bool float16 = false;            // allreduce: float16 on the wire
  double recovery_grace_s = 30;    // how long a lost task may take to come back before a spare takes it over
  double startup_timeout_s = 60;   // how long a worker waits for every task of the cluster at its start
  bool rejoin = false;             // started again mid-job: take the variables as the ps tasks hold them
};

// Parses argv (CLI11): --help prints the options with their defaults and exits 0; an unknown
// option or a bad value exits 2 naming it.
Args parse_args(int argc, char** argv);

Optimizer make_optimizer(const Args& a);
void build_model(layers::Sequential& model, const std::string& kind);
// DIR/STEM.gz when it exists, else DIR/STEM.
std::string data_file(const std::string& dir, const char* stem);

// The run of one worker of a cluster job (--cluster): returns the exit code.
int run_cluster(const Args& a);

}  // namespace troupe::app
