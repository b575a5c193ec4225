// The cost of a while loop's iteration: one step runs a while_loop of N iterations; reports the
// median step time divided by N.
//   trivial:     i = i + 1 while i < N (the loop's own machinery and one add per iteration)
//   independent: the same counter, and per iteration a chain of work that no later iteration
//                needs (on a 128x128 float matrix A: tanh(A + i), its square, its sum; each a
//                single-threaded kernel): iterations can overlap up to parallel_iterations, so
//                P = 10 shows what pipelining them over the cores gains.
//   dependent:   the counter and a 128x128 float state that each iteration computes from the
//                last (tanh(X + 0.01), as an RNN's state): the iterations cannot overlap, and
//                P = 10 must cost no more than P = 1.
// --devices 2 spans the loop over two host CPU devices (TROUPE_CPU_DEVICES=2): the body's add
// (and, for independent, its chain of work) runs on CPU:1, the condition on CPU:0, so every
// iteration sends the counter across and back, and each device runs a control loop.
// --trace FILE (one body, one --parallel, one --devices) writes a Chrome trace of the timed steps.
// --interleave: the --parallel values' loops (one session each, built and warmed up first) take
// their timed steps in turn, so that their ratio compares the same minutes of the machine.
// --pair: besides those, two loops of parallel_iterations 1 side by side in one graph (one step
// runs both, N iterations each; reported per iteration of the two, "pair":true): iterations that
// share nothing, on the same runtime and, with --interleave, in the same minutes: P1 over it is
// what the runtime gets from two cores when no iteration waits for another core's, at that
// minute (a virtual machine's lone busy vCPU, P1's, may run faster in some minutes than in
// others: docs/performance.md, "The independent loop's gain from the second core"), and it over
// P10 how much of that the spread iterations keep.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "actors/session.hpp"
#include "apps/cli_checks.hpp"
#include "bench/flags.hpp"
#include "ops/all.hpp"

namespace troupe::bench {
namespace {

struct Args : CommonFlags {
  int iterations = 100000;
  std::vector<int> parallel = {1, 10};
  std::vector<std::string> bodies = {"trivial", "independent", "dependent"};
  std::vector<int> devices = {1};
  bool interleave = false;
  bool pair = false;
  Args() : CommonFlags{.steps = 5, .warmup = 1} {}
};

void add_options(CLI::App& app, Args& a) {
  add_common_flags(app, a, /*traced=*/true);
  app.add_option("--iterations", a.iterations, "iterations of the loop a step")->check(troupe::cli::positive);
  app.add_option("--parallel", a.parallel, "parallel_iterations values, by ','")
      ->delimiter(',')
      ->check(troupe::cli::positive);
  app.add_option("--body", a.bodies, "loop bodies, by ','")
      ->delimiter(',')
      ->check(CLI::IsMember({"trivial", "independent", "dependent"}));
  app.add_option("--devices", a.devices, "CPU devices, by ','")->delimiter(',')->check(CLI::IsMember({1, 2}));
  app.add_flag("--interleave", a.interleave,
               "the --parallel values' loops take their timed steps in turn (P1, P10, P1, ...), not one "
               "after the other: a stretch in which the machine runs slow then falls on each alike");
  app.add_flag("--pair", a.pair,
               "also two loops of parallel_iterations 1 side by side in one graph, reported per iteration of "
               "the two: what two cores give iterations that share nothing");
}

// Before anything builds the device registry (on first use).
void use_devices(const Args& a) {
  if (std::find(a.devices.begin(), a.devices.end(), 2) != a.devices.end()) setenv("TROUPE_CPU_DEVICES", "2", 1);
}

struct Loop {
  Output n;  // fed: the iteration count
  Output result;
};

Loop build(const Scope& root, const std::string& body, int parallel, int devices) {
  using Vars = std::vector<Output>;
  Loop l;
  l.n = ops::placeholder(root.with_op_name("n"), DType::int32, Shape{});
  Output a;
  if (body == "independent" || body == "dependent") {
    std::vector<float> values(128 * 128);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = float(i % 7) * 0.01f;
    a = ops::constant(root.with_op_name("a"), Tensor::from_vector<float>(values, Shape{128, 128}));
  }
  auto out = ops::while_loop(
      root, [&](const Scope& s, const Vars& v) { return ops::less(s, v[0], l.n); },
      [&](const Scope& loop_scope, const Vars& v) {
        Scope s = devices == 2 ? loop_scope.with_device("/device:CPU:1") : loop_scope;
        auto next = ops::add(s, v[0], ops::constant(s, int32_t(1)));
        if (body == "independent") {
          auto x = ops::tanh(s, ops::add(s, a, ops::cast(s, v[0], DType::float32)));
          ops::sum(s, ops::square(s, x));  // a sink of the iteration: nothing later reads it
        }
        if (body == "dependent") {
          auto x = ops::tanh(s, ops::add(s, v[1], ops::constant(s, 0.01f)));
          ops::sum(s, ops::square(s, x));
          return Vars{next, x};
        }
        return Vars{next};
      },
      body == "dependent" ? Vars{ops::constant(root, int32_t(0)), a} : Vars{ops::constant(root, int32_t(0))},
      {.parallel_iterations = parallel});
  l.result = out[0];
  return l;
}

}  // namespace

int loop_main(int argc, char** argv) {
  Args a;
  CLI::App app{"troupe-bench loop: the cost of a while loop's iteration"};
  add_options(app, a);
  if (auto done = parse_command_line(app, argc, argv)) return *done;
  if (a.steps < 1) fail(ErrorCode::invalid_argument, "--steps must be positive");
  if (!a.trace.empty() && (a.bodies.size() * a.parallel.size() * a.devices.size() > 1 || a.pair))
    fail(ErrorCode::invalid_argument,
         "--trace writes one loop's steps: give one --body, one --parallel and one --devices, and no --pair");
  use_devices(a);
  SessionOptions options;
  options.threads = a.threads;
  // One loop's session and its timed steps.
  struct Timed {
    int parallel;
    bool pair = false;  // two loops of parallel_iterations 1 side by side (--pair)
    Scope root = Scope::root();
    std::vector<Loop> loops;
    std::vector<TensorName> fetches;
    std::unique_ptr<Session> session;
    FeedList feeds;
    std::vector<double> us;
    std::vector<double> cpu_us;  // the process's CPU time in each timed step, all threads
  };
  // pair: two loops of parallel_iterations 1 side by side (--pair), else one of `parallel`.
  auto prepare = [&](const std::string& body, int parallel, int devices, bool pair = false) {
    auto t = std::make_unique<Timed>();
    t->parallel = parallel;
    t->pair = pair;
    if (pair) {
      for (const char* name : {"first", "second"}) t->loops.push_back(build(t->root.sub(name), body, 1, devices));
    } else {
      t->loops.push_back(build(t->root, body, parallel, devices));
    }
    for (const Loop& l : t->loops) {
      t->feeds.push_back({l.n, Tensor::scalar<int32_t>(a.iterations)});
      t->fetches.push_back(l.result);
    }
    SessionOptions traced = options;
    a.apply_trace(traced, /*first_timed=*/std::max(a.warmup, 1) + 1);
    t->session = std::make_unique<Session>(t->root, traced);
    for (int i = 0; i < std::max(a.warmup, 1); ++i) t->session->run(t->feeds, t->fetches);
    return t;
  };
  auto step = [&](Timed& t) {
    const double cpu_start = process_cpu_us();
    auto start = std::chrono::steady_clock::now();
    auto out = t.session->run(t.feeds, t.fetches);
    t.us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
    t.cpu_us.push_back(process_cpu_us() - cpu_start);
    for (const Tensor& count : out)
      if (count.scalar_value<int32_t>() != a.iterations)
        fail(ErrorCode::internal, "the loop ran {} iterations, not {}", count.scalar_value<int32_t>(), a.iterations);
  };
  auto report = [&](const Timed& t, const std::string& body, int devices) {
    const auto [median, min] = summarize(t.us);
    // Per iteration of all the step's loops (two for a pair).
    const double iterations = double(a.iterations) * double(t.loops.size());
    double per = median / iterations, best = min / iterations;
    // CPU time an iteration costs, every thread's (workers spinning for work included): beside
    // the wall time it says how much more work spreading the iterations over the cores made.
    const double cpu = summarize(t.cpu_us).median / iterations;
    if (a.json) {
      std::printf(
          "{\"system\":\"troupe\",\"benchmark\":\"loop\",\"body\":\"%s\",\"parallel\":%d,\"pair\":%s,\"devices\":%d,"
          "\"iterations\":%d,\"steps\":%d,\"threads\":%d,\"interleaved\":%s,\"median_ms\":%.3f,"
          "\"us_per_iteration\":%.3f,\"min_us_per_iteration\":%.3f,\"cpu_us_per_iteration\":%.3f}\n",
          body.c_str(), t.parallel, t.pair ? "true" : "false", devices, a.iterations, a.steps, a.threads,
          a.interleave ? "true" : "false", median / 1000, per, best, cpu);
    } else {
      std::printf(
          "loop, %s body, parallel_iterations %d%s, %d device(s): %d iterations, median %.1f ms/step, "
          "%.3f us/iteration (min %.3f), CPU %.3f us/iteration%s\n",
          body.c_str(), t.parallel, t.pair ? ", two loops side by side" : "", devices, a.iterations, median / 1000,
          per, best, cpu,
          a.interleave ? ", steps interleaved with the other --parallel values'" : "");
    }
    std::fflush(stdout);
  };
  for (int devices : a.devices) {
    for (const auto& body : a.bodies) {
      if (a.interleave) {
        std::vector<std::unique_ptr<Timed>> loops;
        for (int parallel : a.parallel) loops.push_back(prepare(body, parallel, devices));
        if (a.pair) loops.push_back(prepare(body, 1, devices, /*pair=*/true));
        for (int i = 0; i < a.steps; ++i)
          for (auto& t : loops) step(*t);
        for (auto& t : loops) report(*t, body, devices);
      } else {
        auto run = [&](int parallel, bool pair) {
          auto t = prepare(body, parallel, devices, pair);
          for (int i = 0; i < a.steps; ++i) step(*t);
          report(*t, body, devices);
        };
        for (int parallel : a.parallel) run(parallel, false);
        if (a.pair) run(1, true);
      }
    }
  }
  return 0;
}

}  // namespace troupe::bench
