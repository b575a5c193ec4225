// The cost of a while loop's iteration: one step runs a while_loop of N iterations; reports the
// median step time divided by N.
//   trivial:     i = i + 1 while i < N (the loop's own machinery and one add per iteration)
//   independent: the same counter, and per iteration a chain of work that no later iteration
//                needs (on a 128x128 float matrix A: tanh(A + i), its square, its sum; each a
//                single-threaded kernel): iterations can overlap up to parallel_iterations, so
//                P = 10 shows what pipelining them over the cores gains.
// --devices 2 spans the loop over two host CPU devices (TROUPE_CPU_DEVICES=2): the body's add
// (and, for independent, its chain of work) runs on CPU:1, the condition on CPU:0, so every
// iteration sends the counter across and back, and each device runs a control loop.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "actors/session.hpp"
#include "bench/flags.hpp"
#include "ops/all.hpp"

namespace troupe::bench {
namespace {

struct Args : CommonFlags {
  int iterations = 100000;
  std::vector<int> parallel = {1, 10};
  std::vector<std::string> bodies = {"trivial", "independent"};
  std::vector<int> devices = {1};
  Args() : CommonFlags{.steps = 5, .warmup = 1} {}
};

template <class T>
std::vector<T> split(const std::string& list, T (*convert)(const std::string&)) {
  std::vector<T> out;
  std::stringstream in(list);
  for (std::string item; std::getline(in, item, ',');) out.push_back(convert(item));
  return out;
}

Args parse(int argc, char** argv) {
  Args a;
  parse_flags(argc, argv, a, [&](const std::string& k, const std::function<std::string()>& value) {
    if (k == "--iterations") a.iterations = std::stoi(value());
    else if (k == "--parallel") a.parallel = split<int>(value(), [](const std::string& s) { return std::stoi(s); });
    else if (k == "--body") a.bodies = split<std::string>(value(), [](const std::string& s) { return s; });
    else if (k == "--devices") a.devices = split<int>(value(), [](const std::string& s) { return std::stoi(s); });
    else return false;
    return true;
  });
  if (a.iterations < 1 || a.steps < 1) fail(ErrorCode::invalid_argument, "--iterations and --steps must be positive");
  for (int p : a.parallel)
    if (p < 1) fail(ErrorCode::invalid_argument, "--parallel takes positive numbers, got {}", p);
  for (auto& b : a.bodies)
    if (b != "trivial" && b != "independent")
      fail(ErrorCode::invalid_argument, "--body takes trivial and independent, not '{}'", b);
  for (int d : a.devices)
    if (d != 1 && d != 2) fail(ErrorCode::invalid_argument, "--devices takes 1 and 2, not {}", d);
  // Before anything builds the device registry (on first use).
  if (std::find(a.devices.begin(), a.devices.end(), 2) != a.devices.end()) setenv("TROUPE_CPU_DEVICES", "2", 1);
  return a;
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
  if (body == "independent") {
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
        return Vars{next};
      },
      {ops::constant(root, int32_t(0))}, {.parallel_iterations = parallel});
  l.result = out[0];
  return l;
}

}  // namespace

int loop_main(int argc, char** argv) {
  Args a = parse(argc, argv);
  SessionOptions options;
  options.threads = a.threads;
  for (int devices : a.devices) {
    for (const auto& body : a.bodies) {
      for (int parallel : a.parallel) {
        auto root = Scope::root();
        Loop l = build(root, body, parallel, devices);
        Session session(root, options);
        FeedList feeds{{l.n, Tensor::scalar<int32_t>(a.iterations)}};
        for (int i = 0; i < std::max(a.warmup, 1); ++i) session.run(feeds, {l.result});
        std::vector<double> us;
        for (int i = 0; i < a.steps; ++i) {
          auto start = std::chrono::steady_clock::now();
          auto out = session.run(feeds, {l.result});
          us.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
          if (out[0].scalar_value<int32_t>() != a.iterations)
            fail(ErrorCode::internal, "the loop ran {} iterations, not {}", out[0].scalar_value<int32_t>(),
                 a.iterations);
        }
        const auto [median, min] = summarize(us);
        double per = median / a.iterations, best = min / a.iterations;
        if (a.json) {
          std::printf(
              "{\"system\":\"troupe\",\"benchmark\":\"loop\",\"body\":\"%s\",\"parallel\":%d,\"devices\":%d,"
              "\"iterations\":%d,\"steps\":%d,\"threads\":%d,\"median_ms\":%.3f,\"us_per_iteration\":%.3f,"
              "\"min_us_per_iteration\":%.3f}\n",
              body.c_str(), parallel, devices, a.iterations, a.steps, a.threads, median / 1000, per, best);
        } else {
          std::printf(
              "loop, %s body, parallel_iterations %d, %d device(s): %d iterations, median %.1f ms/step, "
              "%.3f us/iteration (min %.3f)\n",
              body.c_str(), parallel, devices, a.iterations, median / 1000, per, best);
        }
        std::fflush(stdout);
      }
    }
  }
  return 0;
}

}  // namespace troupe::bench
