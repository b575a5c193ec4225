// troupe-bench cluster: the step time of a graph split over two troupe-node processes on
// 127.0.0.1, beside TensorFlow's gRPC runtime running the same graph (bench/peers/
// cluster_chain_tf.py, bench/peers/compare_cluster.sh).
//   troupe-bench cluster [--size 512] [--layers 8] [--steps 200] [--warmup 20] [--threads 1]
//                        [--float16] [--local] [--node PATH] [--json]
// The graph: x [size,size] float32, fed every step, then `layers` matmuls with constant
// [size,size] weights, layer i on /job:worker/task:(i % 2), so every layer's output (size*size*4
// bytes: 1 MiB at 512) crosses between the two processes; the step fetches the sum of the last
// output, computed on worker:0 (so with an even number of layers the last output crosses back:
// `layers` crossings per step). The benchmark starts worker:0 and worker:1 itself (troupe-node beside this program, or
// --node), runs a Session with target worker:0 from this process, and stops both by pid at the
// end. --local runs the same graph in this process instead (the cluster's cost, by difference).
// Prints the median and mean step time; --json one line with the same keys as the peer.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>


#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <numeric>
#include <sstream>
#include <thread>
#include <vector>

#include "actors/cluster/cluster_spec.hpp"
#include "actors/session.hpp"
#include "apps/cli_checks.hpp"
#include "bench/flags.hpp"
#include "ops/all.hpp"

extern char** environ;

namespace troupe::bench {
namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// A troupe-node process, stopped (SIGTERM, then SIGKILL) by its pid when this goes.
class Node {
 public:
  Node(const std::string& binary, const std::string& spec, const std::string& task, int threads, const std::string& log)
      : log_(log) {
    std::vector<std::string> argv{binary, "--cluster", spec, "--task", task, "--threads", std::to_string(threads)};
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    posix_spawn_file_actions_t files;
    posix_spawn_file_actions_init(&files);
    posix_spawn_file_actions_addopen(&files, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&files, 1, 2);
    const int rc = posix_spawn(&pid_, binary.c_str(), &files, nullptr, args.data(), environ);
    posix_spawn_file_actions_destroy(&files);
    if (rc != 0) fail(ErrorCode::unavailable, "cannot start {}: {}", binary, std::strerror(rc));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (read_file(log).find("started on") == std::string::npos) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        fail(ErrorCode::unavailable, "troupe-node {} exited at start: {}", task, read_file(log));
      }
      if (std::chrono::steady_clock::now() > deadline)
        fail(ErrorCode::deadline_exceeded, "troupe-node {} did not start within 30 s: {}", task, read_file(log));
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
  ~Node() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGTERM);
    for (int i = 0; i < 250; ++i) {
      int status = 0;
      if (::waitpid(pid_, &status, WNOHANG) == pid_) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }

 private:
  pid_t pid_ = -1;
  std::string log_;
};

std::string node_binary(const std::string& given) {
  if (!given.empty()) return given;
  const auto self = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  for (auto candidate : {self / "troupe-node", self / ".." / "apps" / "troupe-node"})
    if (std::filesystem::exists(candidate)) return candidate.string();
  fail(ErrorCode::not_found, "no troupe-node beside {}: give --node PATH", self.string());
}

}  // namespace

int cluster_main(int argc, char** argv) {
  CommonFlags flags;
  flags.steps = 200;
  flags.warmup = 20;
  flags.threads = 1;
  int64_t size = 512;
  int layers = 8;
  bool float16 = false, local = false;
  std::string node;
  CLI::App app{"troupe-bench cluster: a graph whose layers alternate between two troupe-node processes"};
  add_common_flags(app, flags);
  app.get_option("--threads")->description("each node's threads");
  app.add_option("--size", size, "the matrices' side (size x size float32 cross each layer)")
      ->check(troupe::cli::positive);
  app.add_option("--layers", layers, "matrix products, alternating between the two workers")->check(troupe::cli::positive);
  app.add_flag("--float16", float16, "send the values between the processes as float16");
  app.add_flag("--local", local, "run the same graph in this process, for comparison");
  app.add_option("--node", node, "the troupe-node binary (default: beside this one)");
  if (auto done = parse_command_line(app, argc, argv)) return *done;

  const auto dir = std::filesystem::temp_directory_path() / ("troupe-bench-cluster-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  const std::string spec = (dir / "cluster.json").string();
  std::ofstream(spec) << local_cluster_json({{"worker", 2}});
  const uint16_t p0 = ClusterSpec::from_file(spec).address({"worker", 0}).port;
  const std::string binary = node_binary(node);
  double median = 0, mean = 0;
  {
    std::unique_ptr<Node> w0, w1;
    if (!local) {
      w0 = std::make_unique<Node>(binary, spec, "worker:0", flags.threads, (dir / "worker0.log").string());
      w1 = std::make_unique<Node>(binary, spec, "worker:1", flags.threads, (dir / "worker1.log").string());
    }

    auto root = Scope::root();
    auto x = ops::placeholder(root.with_device("/job:worker/task:0").with_op_name("x"), DType::float32, {size, size});
    Output h = x;
    std::vector<float> w(std::size_t(size * size));
    for (std::size_t i = 0; i < w.size(); ++i) w[i] = float((i * 7919) % 13) / float(6 * size);
    for (int i = 0; i < layers; ++i) {
      auto on = root.with_device(fmt::format("/job:worker/task:{}", i % 2));
      h = ops::matmul(on, h, ops::constant<float>(on, w, {size, size}));
    }
    // The sum runs where x is fed (as the peer's does): the last layer's output crosses back
    // when that layer ran on worker:1.
    auto total = ops::sum(root.with_device("/job:worker/task:0"), h);
    SessionOptions options;
    if (!local) options.target = fmt::format("troupe://127.0.0.1:{}", p0);
    options.threads = flags.threads;
    options.float16_transfer = float16;
    Session session(root, options);
    std::vector<float> xs(std::size_t(size * size), 1.0f / float(size));
    const FeedList feeds = {{x, Tensor::from_vector<float>(xs, {size, size})}};
    for (int i = 0; i < flags.warmup; ++i) session.run(feeds, {total});
    std::vector<double> times;
    for (int i = 0; i < flags.steps; ++i) {
      auto start = std::chrono::steady_clock::now();
      session.run(feeds, {total});
      times.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
    }
    median = summarize(times).median;
    mean = std::accumulate(times.begin(), times.end(), 0.0) / double(times.size());
  }
  std::filesystem::remove_all(dir);
  const int64_t bytes = size * size * 4;
  const int crossings = layers - 1 + ((layers - 1) % 2);
  const char* system = local ? "troupe-local" : "troupe";
  if (flags.json)
    std::printf("{\"system\": \"%s\", \"size\": %lld, \"layers\": %d, \"crossings_per_step\": %d, "
                "\"bytes_per_crossing\": %lld, \"step_ms_median\": %.3f, \"step_ms_mean\": %.3f, \"steps\": %d, "
                "\"float16\": %s}\n",
                system, (long long)size, layers, crossings, (long long)bytes, median, mean, flags.steps,
                float16 ? "true" : "false");
  else
    std::printf("chain %lldx%lld, %d layers %s (%d crossings of %lld bytes per step%s): step %.3f ms median, "
                "%.3f ms mean over %d steps\n",
                (long long)size, (long long)size, layers, local ? "in this process" : "over 2 processes", crossings,
                (long long)bytes, float16 ? ", as float16" : "", median, mean, flags.steps);
  return 0;
}

}  // namespace troupe::bench
