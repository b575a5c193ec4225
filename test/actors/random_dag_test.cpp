// A random DAG of 4,096 nodes run by the executor, compared with a sequential reference
// evaluator that walks the same nodes in order with plain arithmetic.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>

#include "actors/session.hpp"
#include "ops/all.hpp"

using namespace troupe;

namespace {

enum class Kind { add, sub, mul, max, neg, square_root_abs };

struct RefNode {
  Kind kind;
  int a, b;
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_random_dag_of_4096_nodes_matches_a_sequential_reference) {
  constexpr int kNodes = 4096, kInputs = 8;
  std::mt19937 rng(20261122);
  auto root = Scope::root();
  std::vector<Output> outs;
  std::vector<double> ref;
  std::vector<Output> inputs;
  FeedList feeds;
  for (int i = 0; i < kInputs; ++i) {
    auto p = ops::placeholder(root, DType::float64, {4});
    inputs.push_back(p);
    outs.push_back(p);
  }
  // Reference values per node: 4 lanes each.
  std::vector<std::array<double, 4>> value(kInputs);
  std::uniform_real_distribution<double> u(-2, 2);
  for (int i = 0; i < kInputs; ++i) {
    std::vector<double> v(4);
    for (int k = 0; k < 4; ++k) value[i][k] = v[k] = u(rng);
    feeds.push_back({inputs[i], Tensor::from_vector<double>(v)});
  }
  std::vector<int> uses(kInputs + kNodes, 0);
  for (int i = 0; i < kNodes; ++i) {
    int n = int(outs.size());
    std::uniform_int_distribution<int> pick(std::max(0, n - 200), n - 1);
    int a = pick(rng), b = pick(rng);
    auto kind = Kind(rng() % 6);
    Output o;
    std::array<double, 4> r;
    for (int k = 0; k < 4; ++k) {
      double x = value[a][k], y = value[b][k];
      switch (kind) {
        case Kind::add: r[k] = x + y; break;
        case Kind::sub: r[k] = x - y; break;
        case Kind::mul: r[k] = std::tanh(x) * y; break;  // tanh keeps products bounded
        case Kind::max: r[k] = std::max(x, y); break;
        case Kind::neg: r[k] = -x; break;
        case Kind::square_root_abs: r[k] = std::sqrt(std::abs(x)); break;
      }
    }
    switch (kind) {
      case Kind::add: o = ops::add(root, outs[a], outs[b]); break;
      case Kind::sub: o = ops::sub(root, outs[a], outs[b]); break;
      case Kind::mul: {
        // tanh(x) = 1 - 2 / (exp(2x) + 1), from the ops we have.
        auto e = ops::exp(root, ops::add(root, outs[a], outs[a]));
        auto t = ops::sub(root, ops::ones_like(root, e),
                          ops::div(root, ops::fill(root, {4}, ops::constant(root, 2.0)),
                                   ops::add(root, e, ops::ones_like(root, e))));
        o = ops::mul(root, t, outs[b]);
        break;
      }
      case Kind::max: o = ops::maximum(root, outs[a], outs[b]); break;
      case Kind::neg: o = ops::neg(root, outs[a]); break;
      case Kind::square_root_abs: o = ops::sqrt(root, ops::abs(root, outs[a])); break;
    }
    ++uses[a];
    ++uses[b];
    outs.push_back(o);
    value.push_back(r);
  }
  std::vector<TensorName> fetches;
  std::vector<int> fetched;
  for (int i = kInputs; i < int(outs.size()); ++i)
    if (uses[i] == 0 || i % 97 == 0) {
      fetches.push_back(outs[i]);
      fetched.push_back(i);
    }
  Session s(root);
  for (int run = 0; run < 3; ++run) {
    auto got = s.run(feeds, fetches);
    BOOST_REQUIRE(got.size() == fetched.size());
    int mismatches = 0;
    for (std::size_t f = 0; f < fetched.size(); ++f) {
      auto v = got[f].to_vector<double>();
      for (int k = 0; k < 4; ++k) {
        double want = value[fetched[f]][k];
        // float64 throughout; the tanh identity differs from std::tanh by a few ulps.
        if (std::abs(v[k] - want) > 1e-9 * std::max(1.0, std::abs(want))) ++mismatches;
      }
    }
    BOOST_TEST(mismatches == 0);
  }
  BOOST_TEST_MESSAGE("fetched " << fetched.size() << " of " << root.graph().size() << " nodes");
}
