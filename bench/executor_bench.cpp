// The executor's per-node overhead: graphs of trivial nodes (scalar float adds) run through a
// Session. Reports the median step time divided by the number of nodes, the set-up (the first
// run, which builds the executable and spawns its actors) and the teardown (the session's end).
//   chain:  x_{i+1} = x_i + 1, N adds in sequence from a fed x_0; fetch the last.
//   fanout: N adds x_0 + c_i of the fed x_0, all joined by one NoOp target.
//   random: N adds in 16 lanes, each of its lane's last node and a random recent node (seeded),
//           the sinks joined by a NoOp target.
// "nodes" is N, the adds; the few other nodes (x_0, constants, the join) are not counted.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "actors/session.hpp"
#include "apps/cli_checks.hpp"
#include "bench/flags.hpp"
#include "core/huge_pages.hpp"
#include "devices/cpu_threads.hpp"
#include "ops/all.hpp"

namespace troupe::bench {
namespace {

struct Args : CommonFlags {
  std::string shape = "chain";
  int nodes = 10000;
  int64_t slow_step_report_ms = 60000;  // SessionOptions::slow_step_report (its default); 0: off
  int64_t deadline_ms = 0;              // RunOptions::timeout of every step; 0: none
  Args() : CommonFlags{.steps = 20, .warmup = 3} {}
};

void add_options(CLI::App& app, Args& a) {
  add_common_flags(app, a, /*traced=*/true);
  app.add_option("--shape", a.shape, "the graph: a chain of adds, a fan-out and join, or a random DAG")
      ->check(CLI::IsMember({"chain", "fanout", "random"}));
  app.add_option("--nodes", a.nodes, "the adds in the graph")->check(troupe::cli::positive);
  app.add_option("--slow-step-report-ms", a.slow_step_report_ms,
                 "the session's slow-step report after this long (its watch's cost per step); 0: off")
      ->check(troupe::cli::non_negative);
  app.add_option("--deadline-ms", a.deadline_ms, "every step's deadline (RunOptions::timeout); 0: none")
      ->check(troupe::cli::non_negative);
}

// This process's resident memory, MiB (VmRSS).
double rss_mib() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) / 1024;
  return 0;
}

struct Built {
  Output x0;  // fed each step, so that nothing can be folded at build time
  std::vector<TensorName> fetches;
  std::vector<OpName> targets;
};

// Every add is distinct (no two share both inputs), so CSE merges nothing: the graph that runs
// has exactly the nodes built.
Built build(const Scope& s, const Args& a) {
  Built b;
  b.x0 = ops::placeholder(s.with_op_name("x0"), DType::float32, Shape{});
  if (a.shape == "chain") {
    auto one = ops::constant(s.with_op_name("one"), 1.0f);
    Output x = b.x0;
    for (int i = 0; i < a.nodes; ++i) x = ops::add(s, x, one);
    b.fetches.push_back(x);
  } else if (a.shape == "fanout") {
    std::vector<Output> outs;
    for (int i = 0; i < a.nodes; ++i) outs.push_back(ops::add(s, b.x0, ops::constant(s, float(i))));
    b.targets.push_back(ops::group(s.with_op_name("join"), outs));
  } else {
    // kLanes chains, each node also reading a random recent node of any lane: a DAG with
    // about kLanes nodes ready at a time and edges across lanes.
    constexpr int kLanes = 16;
    std::mt19937 rng(1234);
    std::vector<Output> all = {b.x0};
    std::vector<Output> lane(kLanes, b.x0);
    std::vector<int> uses(1 + a.nodes, 0);
    std::vector<int> lane_id(kLanes, 0);
    for (int i = 0; i < a.nodes; ++i) {
      int n = int(all.size());
      std::uniform_int_distribution<int> recent(std::max(0, n - 4 * kLanes), n - 1);
      int q = recent(rng);
      int l = i % kLanes;
      ++uses[lane_id[l]];
      ++uses[q];
      lane[l] = ops::add(s, lane[l], all[q]);
      lane_id[l] = int(all.size());
      all.push_back(lane[l]);
    }
    std::vector<Output> sinks;
    for (int i = 1; i < int(all.size()); ++i)
      if (!uses[i]) sinks.push_back(all[i]);
    b.targets.push_back(ops::group(s.with_op_name("join"), sinks));
  }
  return b;
}

}  // namespace

int executor_main(int argc, char** argv) {
  Args a;
  CLI::App app{"troupe-bench executor: the executor's cost per node, graphs of scalar adds"};
  add_options(app, a);
  if (auto done = parse_command_line(app, argc, argv)) return *done;
  if (a.steps < 1) fail(ErrorCode::invalid_argument, "--steps must be positive");
  auto root = Scope::root();
  Built b = build(root, a);
  SessionOptions options;
  options.threads = a.threads;
  options.slow_step_report = std::chrono::milliseconds(a.slow_step_report_ms);
  a.apply_trace(options, /*first_timed=*/2 + a.warmup);  // run 1 builds, then the warm-up
  const int threads = a.threads > 0 ? a.threads : usable_cores();
  // The session on the heap: its end (the executable's actors stopped and freed) is timed too.
  auto owned = std::make_unique<Session>(root, options);
  Session& session = *owned;
  auto start = std::chrono::steady_clock::now();
  FeedList feeds{{b.x0, Tensor::scalar(0.0f)}};
  const RunOptions run_options{.timeout = std::chrono::milliseconds(a.deadline_ms)};
  session.run(feeds, b.fetches, b.targets, run_options);  // builds the executable and spawns the actors
  double setup_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  for (int i = 0; i < a.warmup; ++i) session.run(feeds, b.fetches, b.targets, run_options);
  const double rss_before = rss_mib();
  std::vector<double> us;
  for (int i = 0; i < a.steps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    auto out = session.run(feeds, b.fetches, b.targets, run_options);
    us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
    if (a.shape == "chain" && out[0].scalar_value<float>() != float(a.nodes))
      fail(ErrorCode::internal, "chain computed {}, expected {}", out[0].scalar_value<float>(), a.nodes);
  }
  std::sort(us.begin(), us.end());
  double median = us[us.size() / 2], best = us.front();
  double per_node = median / a.nodes;
  const double rss_after = rss_mib();
  const auto closing = std::chrono::steady_clock::now();
  owned.reset();
  const double teardown_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - closing).count();
  if (a.json) {
    std::printf(
        "{\"bench\":\"executor\",\"system\":\"troupe\",\"shape\":\"%s\",\"nodes\":%d,\"steps\":%d,"
        "\"threads\":%d,\"median_step_ms\":%.3f,\"min_step_ms\":%.3f,\"us_per_node\":%.4f,"
        "\"nodes_per_s\":%.0f,\"setup_ms\":%.1f,\"teardown_ms\":%.1f,\"rss_mib_before\":%.1f,"
        "\"rss_mib_after\":%.1f,\"huge_page_ranges\":%zu}\n",
        a.shape.c_str(), a.nodes, a.steps, threads, median / 1e3, best / 1e3, per_node,
        1e6 / per_node, setup_ms, teardown_ms, rss_before, rss_after, huge_pages::counts().collapsed);
  } else {
    std::printf("executor %s: %d nodes, %d steps: median %.3f ms/step (min %.3f), %.3f us/node, "
                "%.2f M nodes/s (setup %.1f ms, teardown %.1f ms); RSS %.1f -> %.1f MiB over the timed steps; %zu "
                "ranges of 2 MiB in huge pages\n",
                a.shape.c_str(), a.nodes, a.steps, median / 1e3, best / 1e3, per_node,
                1e6 / per_node / 1e6, setup_ms, teardown_ms, rss_before, rss_after, huge_pages::counts().collapsed);
  }
  return 0;
}

}  // namespace troupe::bench
