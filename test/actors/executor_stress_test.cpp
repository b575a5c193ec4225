// The executor's fast path under load: a random DAG with while loops (some nesting a cond) and
// conds, run in many concurrent steps from many threads, some of which fail in a kernel, every
// result checked against a sequential reference evaluator that walks the same nodes in order
// with plain arithmetic. Run under the sanitizer builds too (docs/building.md, "Sanitizer builds").
#include <boost/test/unit_test.hpp>

#include <array>
#include <atomic>
#include <cmath>
#include <random>
#include <thread>

#include "actors/executor/node.hpp"
#include "actors/session.hpp"
#include "ops/all.hpp"
#include "test/support/settles.hpp"

using namespace troupe;
using troupe::testing::settles;

namespace {

using Lanes = std::array<double, 4>;
using Vars = std::vector<Output>;

enum class Kind { mean, half_difference, max, neg, cond, loop, loop_with_cond };

struct RefNode {
  Kind kind;
  int a = 0, b = 0;
  int iterations = 0;  // loops
};

double sum(const Lanes& x) { return x[0] + x[1] + x[2] + x[3]; }

// The nodes' values for input x, in order: what the graph must compute.
std::vector<Lanes> evaluate(const std::vector<RefNode>& nodes, const Lanes& x) {
  std::vector<Lanes> v{x};
  for (const RefNode& n : nodes) {
    const Lanes &a = v[n.a], &b = v[n.b];
    Lanes r{};
    switch (n.kind) {
      case Kind::mean:
        for (int k = 0; k < 4; ++k) r[k] = (a[k] + b[k]) * 0.5;
        break;
      case Kind::half_difference:
        for (int k = 0; k < 4; ++k) r[k] = (a[k] - b[k]) * 0.5;
        break;
      case Kind::max:
        for (int k = 0; k < 4; ++k) r[k] = std::max(a[k], b[k]);
        break;
      case Kind::neg:
        for (int k = 0; k < 4; ++k) r[k] = -a[k];
        break;
      case Kind::cond:
        for (int k = 0; k < 4; ++k) r[k] = sum(a) < 0 ? (a[k] + b[k]) * 0.5 : a[k] - b[k] * 0.5;
        break;
      case Kind::loop:
      case Kind::loop_with_cond:
        r = a;
        for (int i = 0; i < n.iterations; ++i) {
          Lanes next;
          for (int k = 0; k < 4; ++k) {
            next[k] = r[k] * 0.5 + b[k];
            if (n.kind == Kind::loop_with_cond) next[k] = sum(r) < 0 ? next[k] + 1.0 : next[k] - 1.0;
          }
          r = next;
        }
        break;
    }
    v.push_back(r);
  }
  return v;
}

Output half(const Scope& s, Output x) { return ops::mul(s, x, ops::constant(s, 0.5)); }
Output negative_sum(const Scope& s, Output x) { return ops::less(s, ops::sum(s, x), ops::constant(s, 0.0)); }

// The same node in the graph.
Output build(const Scope& root, const RefNode& n, Output a, Output b, int parallel_iterations) {
  switch (n.kind) {
    case Kind::mean: return half(root, ops::add(root, a, b));
    case Kind::half_difference: return half(root, ops::sub(root, a, b));
    case Kind::max: return ops::maximum(root, a, b);
    case Kind::neg: return ops::neg(root, a);
    case Kind::cond:
      return ops::cond(
          root, negative_sum(root, a), {a, b},
          [](const Scope& s, const Vars& in) { return Vars{half(s, ops::add(s, in[0], in[1]))}; },
          [](const Scope& s, const Vars& in) { return Vars{ops::sub(s, in[0], half(s, in[1]))}; })[0];
    case Kind::loop:
    case Kind::loop_with_cond: {
      const int iterations = n.iterations;
      const bool with_cond = n.kind == Kind::loop_with_cond;
      return ops::while_loop(
          root,
          [iterations](const Scope& s, const Vars& v) { return ops::less(s, v[0], ops::constant(s, iterations)); },
          [b, with_cond](const Scope& s, const Vars& v) {
            Output next = ops::add(s, half(s, v[1]), b);  // b: a loop invariant
            if (with_cond)
              next = ops::cond(
                  s, negative_sum(s, v[1]), {next},
                  [](const Scope& t, const Vars& in) { return Vars{ops::add(t, in[0], ops::constant(t, 1.0))}; },
                  [](const Scope& t, const Vars& in) { return Vars{ops::sub(t, in[0], ops::constant(t, 1.0))}; })[0];
            return Vars{ops::add(s, v[0], ops::constant(s, 1)), next};
          },
          {ops::constant(root, 0), a}, {.parallel_iterations = parallel_iterations})[1];
    }
  }
  return a;
}

}  // namespace

namespace {

void run_random_graph_in_concurrent_steps(uint32_t seed) {
  constexpr int kNodes = 240, kThreads = 8, kStepsPerThread = 12;
  std::mt19937 rng(seed);
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float64, {4});
  // A step fed divisor 0 fails in a kernel (integer division by zero) while the others run.
  auto divisor = ops::placeholder(root.with_op_name("divisor"), DType::int32, Shape{});
  auto quotient = ops::div(root, ops::constant(root, 12), divisor);

  std::vector<RefNode> nodes;
  std::vector<Output> outs{x};
  std::vector<int> uses(1 + kNodes, 0);
  const int parallel[] = {1, 2, 10};
  for (int i = 0; i < kNodes; ++i) {
    const int n = int(outs.size());
    std::uniform_int_distribution<int> recent(std::max(0, n - 24), n - 1);
    RefNode node{Kind(rng() % 7), recent(rng), recent(rng), 1 + int(rng() % 5)};
    ++uses[node.a];
    ++uses[node.b];
    outs.push_back(build(root, node, outs[node.a], outs[node.b], parallel[rng() % 3]));
    nodes.push_back(node);
  }
  std::vector<TensorName> fetches{quotient};
  std::vector<int> fetched;
  for (int i = 1; i < int(outs.size()); ++i)
    if (uses[i] == 0 || i % 13 == 0) {
      fetches.push_back(outs[i]);
      fetched.push_back(i);
    }

  Session s(root, {.max_steps_in_flight = 6});
  std::atomic<int> wrong{0}, failed_as_expected{0}, passed{0};
  std::vector<std::string> problems(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 feeds(uint32_t(1000 + t));
      std::uniform_real_distribution<double> u(-3, 3);
      for (int step = 0; step < kStepsPerThread; ++step) {
        const Lanes in{u(feeds), u(feeds), u(feeds), u(feeds)};
        const bool fail = (t + step) % 5 == 0;
        FeedList feed{{x, Tensor::from_vector<double>({in[0], in[1], in[2], in[3]})},
                      {divisor, Tensor::scalar<int32_t>(fail ? 0 : 3)}};
        std::vector<Tensor> got;
        try {
          got = s.run(feed, fetches);
        } catch (const Error& e) {
          const bool expected = fail && std::string(e.what()).find("division by zero") != std::string::npos;
          if (expected) ++failed_as_expected;
          else problems[t] += std::string("step failed: ") + e.what() + "\n";
          continue;
        }
        if (fail) {
          problems[t] += "a step fed divisor 0 did not fail\n";
          continue;
        }
        const auto want = evaluate(nodes, in);
        bool right = got.size() == fetches.size() && got[0].scalar_value<int32_t>() == 4;
        for (std::size_t f = 0; right && f < fetched.size(); ++f) {
          const auto v = got[f + 1].to_vector<double>();
          for (int k = 0; k < 4; ++k)
            if (std::abs(v[k] - want[fetched[f]][k]) > 1e-9 * std::max(1.0, std::abs(want[fetched[f]][k]))) {
              right = false;
              problems[t] += "node " + std::to_string(fetched[f]) + " lane " + std::to_string(k) + ": got " +
                             std::to_string(v[k]) + ", want " + std::to_string(want[fetched[f]][k]) + "\n";
              break;
            }
        }
        if (right) ++passed;
        else ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  std::string all;
  for (auto& p : problems) all += p;
  BOOST_TEST(all.empty(), all);
  BOOST_TEST(wrong.load() == 0);
  int expected_failures = 0;
  for (int t = 0; t < kThreads; ++t)
    for (int step = 0; step < kStepsPerThread; ++step) expected_failures += (t + step) % 5 == 0;
  BOOST_TEST(failed_as_expected.load() == expected_failures);
  BOOST_TEST(passed.load() == kThreads * kStepsPerThread - expected_failures);
  BOOST_TEST(s.steps_in_flight() == 0);
  BOOST_TEST(settles(s), "no frame, stack or pending input is left behind: " << s.loop_state().frames << " frame(s), "
                                                                          << s.loop_state().saved_values
                                                                          << " saved value(s)\n"
                                                                          << s.describe_waiting());
  BOOST_TEST_MESSAGE(root.graph().size() << " nodes, " << fetches.size() << " fetches, " << passed.load()
                                         << " steps checked, " << failed_as_expected.load() << " failed as they should");
}

}  // namespace

BOOST_AUTO_TEST_CASE(concurrent_steps_of_a_random_graph_with_loops_and_conds_match_a_sequential_reference) {
  run_random_graph_in_concurrent_steps(20261126);
}

// The same with every loop that may spread its iterations over the workers spreading them
// (NodeActor::spread), however little its iterations cost: inputs of one iteration handed from
// worker to worker, nodes moved with their mailboxes, and conds and failing steps among them.
BOOST_AUTO_TEST_CASE(the_same_with_every_loops_iterations_spread_over_the_workers) {
  NodeActor::set_spread_ticks(0);
  try {
    run_random_graph_in_concurrent_steps(20261127);
  } catch (...) {
    NodeActor::set_spread_ticks(-1);
    throw;
  }
  NodeActor::set_spread_ticks(-1);
}
