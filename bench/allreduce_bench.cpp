// troupe-bench allreduce: ring all-reduce (actors/cluster/allreduce.hpp) among N processes on
// 127.0.0.1, beside PyTorch's gloo (bench/peers/allreduce_torch.py, compare_allreduce.sh).
//   troupe-bench allreduce [--procs 2,3,4] [--mib 1,16,64] [--steps 10] [--warmup 2] [--float16]
//                          [--chunk-kib 1024] [--json]
// For each process count the benchmark writes a spec of that many worker tasks on free loopback
// ports and starts that many processes of itself (each a cluster member with an AllReduceGroup;
// they die with it, and are stopped by pid); each sums a float32 tensor of each size `steps`
// times after `warmup` untimed ones, a one-element all-reduce before each timed one so the
// processes start together. worker:0 reports the median time, and the bus bandwidth
// 2(N-1)/N x bytes / time (what each link carries: NCCL's and gloo's benchmarks' figure).
// --hosts NS=ADDRESS,... puts process k in the k-th network namespace at that address (port
// 22220 + k; bench/shaped_links.sh), instead of free ports on 127.0.0.1.
#include <CLI/CLI.hpp>

#include <signal.h>
#include <spawn.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>
#include <vector>

#include "actors/cluster/allreduce.hpp"
#include "actors/cluster/cluster_spec.hpp"
#include "actors/cluster/member.hpp"
#include "apps/cli_checks.hpp"
#include "bench/flags.hpp"
#include "bench/hosts.hpp"
#include "core/error.hpp"

extern char** environ;

namespace troupe::bench {
namespace {

struct Options {
  std::vector<int> procs = {2, 3, 4};
  std::vector<double> mib = {1, 16, 64};
  int steps = 10, warmup = 2;
  bool float16 = false;
  int chunk_kib = 1024;
  bool json = false;
  std::vector<std::string> hosts;  // NS=ADDRESS per process
  // A child process: its spec and task, where worker:0 writes its results, and its host.
  std::string spec, task, out, host;
};

// One process of the ring: times the sizes and, as worker:0, writes one line per size.
int run_child(const Options& o) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // goes with the benchmark
  if (!o.host.empty()) enter(parse_hosts({o.host})[0]);
  ClusterSpec spec = ClusterSpec::from_file(o.spec);
  ClusterMember member(spec, parse_task_id(o.task));
  AllReduceGroup group(member, "worker",
                       {.chunk_bytes = std::size_t(o.chunk_kib) << 10, .float16 = o.float16,
                        .timeout = std::chrono::milliseconds(120000)});
  std::ofstream out;
  if (group.rank() == 0) out.open(o.out);
  for (double mib : o.mib) {
    const int64_t n = int64_t(mib * double(1 << 20) / 4);
    Tensor t = Tensor::zeros(DType::float32, Shape{n});
    std::vector<Tensor> one = {t};
    std::vector<double> times;
    for (int i = 0; i < o.warmup + o.steps; ++i) {
      std::vector<Tensor> barrier = {Tensor::zeros(DType::float32, Shape{1})};
      group.all_reduce(barrier);
      auto start = std::chrono::steady_clock::now();
      group.all_reduce(one);
      if (i >= o.warmup) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
    }
    if (group.rank() == 0) {
      const Summary s = summarize(times);
      const double bytes = double(n) * 4, procs = double(group.size());
      out << fmt::format(
                 "{{\"system\":\"troupe\",\"procs\":{},\"mib\":{},\"float16\":{},\"steps\":{},\"median_ms\":{:.3f},"
                 "\"min_ms\":{:.3f},\"busbw_gbps\":{:.3f}}}",
                 group.size(), mib, o.float16 ? "true" : "false", o.steps, s.median * 1e3, s.min * 1e3,
                 2 * (procs - 1) / procs * bytes / s.median / 1e9)
          << std::endl;
    }
  }
  return 0;
}

std::string read_all(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Starts N processes of this program for one process count and returns worker:0's lines.
std::string run_ring(const Options& o, int procs, const std::filesystem::path& dir) {
  const std::string spec = (dir / fmt::format("cluster-{}.json", procs)).string();
  const std::string results = (dir / fmt::format("results-{}.txt", procs)).string();
  const std::vector<Host> hosts = parse_hosts(o.hosts);
  if (!hosts.empty() && int(hosts.size()) < procs)
    fail(ErrorCode::invalid_argument, "--hosts names {} hosts for {} processes", hosts.size(), procs);
  if (hosts.empty()) {
    std::ofstream(spec) << local_cluster_json({{"worker", procs}});
  } else {
    std::string workers;
    for (int k = 0; k < procs; ++k)
      workers += fmt::format("{}\"{}:{}\"", k ? ", " : "", hosts[std::size_t(k)].address, 22220 + k);
    std::ofstream(spec) << "{\"cluster\": {\"worker\": [" << workers << "]}}";
  }
  const std::string self = std::filesystem::read_symlink("/proc/self/exe").string();
  std::vector<pid_t> pids;
  auto stop_all = [&] {
    for (pid_t p : pids) ::kill(p, SIGKILL);
    for (pid_t p : pids) ::waitpid(p, nullptr, 0);
  };
  for (int k = 0; k < procs; ++k) {
    std::vector<std::string> argv = {self, "allreduce", "--child-spec", spec, "--child-task", fmt::format("worker:{}", k),
                                     "--child-out", results, "--steps", std::to_string(o.steps), "--warmup",
                                     std::to_string(o.warmup), "--chunk-kib", std::to_string(o.chunk_kib)};
    std::string sizes;
    for (double m : o.mib) sizes += (sizes.empty() ? "" : ",") + fmt::format("{}", m);
    argv.insert(argv.end(), {"--mib", sizes});
    if (o.float16) argv.push_back("--float16");
    if (!hosts.empty()) argv.insert(argv.end(), {"--child-host", o.hosts[std::size_t(k)]});
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    pid_t pid = -1;
    const int rc = posix_spawn(&pid, self.c_str(), nullptr, nullptr, args.data(), environ);
    if (rc != 0) {
      stop_all();
      fail(ErrorCode::unavailable, "cannot start {} for worker:{}: {}", self, k, std::strerror(rc));
    }
    pids.push_back(pid);
  }
  // Every process's end, within a bound that grows with the work.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(120 + 10 * (o.steps + o.warmup));
  std::vector<bool> done(pids.size(), false);
  for (std::size_t left = pids.size(); left > 0;) {
    for (std::size_t k = 0; k < pids.size(); ++k) {
      if (done[k]) continue;
      int status = 0;
      if (::waitpid(pids[k], &status, WNOHANG) != pids[k]) continue;
      done[k] = true;
      --left;
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        pids.erase(pids.begin() + long(k));
        stop_all();
        fail(ErrorCode::aborted, "the all-reduce process worker:{} of {} failed (status {})", k, procs, status);
      }
    }
    if (std::chrono::steady_clock::now() > deadline) {
      stop_all();
      fail(ErrorCode::deadline_exceeded, "the {} all-reduce processes did not finish in time", procs);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return read_all(results);
}

}  // namespace

int allreduce_main(int argc, char** argv) {
  Options o;
  CLI::App app{"troupe-bench allreduce: ring all-reduce among N processes (on 127.0.0.1, or --hosts)"};
  app.option_defaults()->always_capture_default();
  app.add_option("--procs", o.procs, "process counts")->delimiter(',')->check(CLI::Range(1, 64));
  app.add_option("--mib", o.mib, "tensor sizes in MiB")->delimiter(',')->check(troupe::cli::positive);
  app.add_option("--steps", o.steps, "timed all-reduces per size")->check(troupe::cli::positive);
  app.add_option("--warmup", o.warmup, "untimed all-reduces first")->check(troupe::cli::non_negative);
  app.add_flag("--float16", o.float16, "float16 on the wire");
  app.add_option("--chunk-kib", o.chunk_kib, "the pipelining chunk in KiB")->check(CLI::Range(1, 1 << 20));
  app.add_flag("--json", o.json, "one JSON line per point");
  app.add_option("--child-spec", o.spec)->group("");  // the benchmark's own processes
  app.add_option("--child-task", o.task)->group("");
  app.add_option("--child-out", o.out)->group("");
  app.add_option("--child-host", o.host)->group("");
  app.add_option("--hosts", o.hosts,
                 "NS=ADDRESS per process: process k in the k-th network namespace (default: 127.0.0.1)")
      ->delimiter(',');
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (!o.spec.empty()) return run_child(o);
  char pattern[] = "/tmp/troupe-bench-allreduce-XXXXXX";
  if (!::mkdtemp(pattern)) fail(ErrorCode::unavailable, "mkdtemp: {}", std::strerror(errno));
  const std::filesystem::path dir = pattern;
  try {
    if (!o.json) std::printf("%-6s %8s %12s %12s %14s\n", "procs", "MiB", "median ms", "min ms", "busbw GB/s");
    for (int procs : o.procs) {
      std::istringstream lines(run_ring(o, procs, dir));
      for (std::string line; std::getline(lines, line);) {
        if (o.json) {
          std::printf("%s\n", line.c_str());
        } else {
          auto field = [&](const std::string& key) {
            auto at = line.find("\"" + key + "\":");
            return std::stod(line.substr(at + key.size() + 3));
          };
          std::printf("%-6d %8g %12.3f %12.3f %14.3f\n", procs, field("mib"), field("median_ms"), field("min_ms"),
                      field("busbw_gbps"));
        }
        std::fflush(stdout);
      }
    }
  } catch (...) {
    std::filesystem::remove_all(dir);
    throw;
  }
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace troupe::bench
