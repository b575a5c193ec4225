// RandomUniform and RandomNormal: range, moments over 100k samples, and the seeding contract
// (the same seed gives the same sequence in every session; successive runs differ).
// Tolerances, for n = 100000 samples: each is at least 5 standard errors of the statistic, and
// the seeds are fixed, so the checks are deterministic.
#include <algorithm>

#include "op_test.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

constexpr int64_t kSamples = 100000;

struct Moments {
  double mean = 0, variance = 0, min = 0, max = 0;
};

Moments moments_of(const std::vector<double>& v) {
  Moments m;
  for (double x : v) m.mean += x;
  m.mean /= double(v.size());
  for (double x : v) m.variance += (x - m.mean) * (x - m.mean);
  m.variance /= double(v.size() - 1);
  m.min = *std::min_element(v.begin(), v.end());
  m.max = *std::max_element(v.begin(), v.end());
  return m;
}

std::vector<double> sample(Output y, const Scope& root) {
  Session session(root);
  return as_doubles(session.run({y})[0]);
}

// Uniform on [lo, hi) of width w: every value in range; mean (hi+lo)/2 within 0.006 w (6.6
// standard errors: the sd of the mean is w/sqrt(12 n) = 0.0009 w); variance w^2/12 within 2.4%
// (8 standard errors); each of 10 equal bins holds n/10 within 500 (5 sd of 95).
void check_uniform(DType dtype, double lo, double hi, uint32_t seed) {
  auto root = Scope::root();
  auto y = ops::random_uniform(root, Shape{kSamples}, dtype, lo, hi, {.seed = seed});
  BOOST_TEST(y.dtype() == dtype);
  auto v = sample(y, root);
  BOOST_TEST_REQUIRE(v.size() == std::size_t(kSamples));
  Moments m = moments_of(v);
  BOOST_TEST_CONTEXT(name_of(dtype) << " on [" << lo << ", " << hi << ")") {
    BOOST_TEST(m.min >= lo);
    BOOST_TEST(m.max < hi);
    BOOST_TEST(std::fabs(m.mean - (lo + hi) / 2) < 0.006 * (hi - lo), "mean " << m.mean);
    double variance = (hi - lo) * (hi - lo) / 12;
    BOOST_TEST(std::fabs(m.variance / variance - 1) < 0.024, "variance " << m.variance);
    std::vector<int> bins(10, 0);
    for (double x : v) ++bins[std::size_t(std::clamp(int((x - lo) / (hi - lo) * 10), 0, 9))];
    for (int b = 0; b < 10; ++b) BOOST_TEST(std::abs(bins[std::size_t(b)] - kSamples / 10) < 500, "bin " << b << ": " << bins[std::size_t(b)]);
  }
}

// Normal(mean, stddev): sample mean within 0.025 stddev (8 standard errors of 0.0032),
// sample stddev within 2% (its sd is 0.22%), and the fraction within one and two standard
// deviations 0.6827 +- 0.01 and 0.9545 +- 0.005 (sds 0.0015 and 0.0007).
void check_normal(DType dtype, double mean, double stddev, uint32_t seed) {
  auto root = Scope::root();
  auto y = ops::random_normal(root, Shape{kSamples}, dtype, mean, stddev, {.seed = seed});
  auto v = sample(y, root);
  BOOST_TEST_REQUIRE(v.size() == std::size_t(kSamples));
  Moments m = moments_of(v);
  BOOST_TEST_CONTEXT(name_of(dtype) << " N(" << mean << ", " << stddev << ")") {
    BOOST_TEST(std::fabs(m.mean - mean) < 0.025 * stddev, "mean " << m.mean);
    BOOST_TEST(std::fabs(std::sqrt(m.variance) / stddev - 1) < 0.02, "stddev " << std::sqrt(m.variance));
    double one = 0, two = 0;
    for (double x : v) {
      one += std::fabs(x - mean) < stddev;
      two += std::fabs(x - mean) < 2 * stddev;
    }
    BOOST_TEST(std::fabs(one / kSamples - 0.6827) < 0.01, "within one sd: " << one / kSamples);
    BOOST_TEST(std::fabs(two / kSamples - 0.9545) < 0.005, "within two sd: " << two / kSamples);
  }
}

// Three successive runs of a node built with `options` in a fresh session.
std::vector<std::vector<double>> three_runs(bool normal, ops::RandomOptions options) {
  auto root = Scope::root();
  auto y = normal ? ops::random_normal(root, Shape{16}, DType::float32, 0, 1, options)
                  : ops::random_uniform(root, Shape{16}, DType::float32, 0, 1, options);
  Session session(root);
  std::vector<std::vector<double>> runs;
  for (int i = 0; i < 3; ++i) runs.push_back(as_doubles(session.run({y})[0]));
  return runs;
}

}  // namespace

BOOST_AUTO_TEST_CASE(random_uniform_float32_stays_in_range_with_the_right_mean_and_variance) {
  check_uniform(DType::float32, -2, 3, 7);
  check_uniform(DType::float32, 0, 1, 8);
}

BOOST_AUTO_TEST_CASE(random_uniform_float64_stays_in_range_with_the_right_mean_and_variance) {
  check_uniform(DType::float64, -2, 3, 9);
  check_uniform(DType::float64, 10, 15, 10);
}

BOOST_AUTO_TEST_CASE(random_uniform_float16_stays_in_range_with_the_right_mean_and_variance) {
  check_uniform(DType::float16, 0, 1, 11);
}

BOOST_AUTO_TEST_CASE(random_normal_has_the_requested_mean_and_stddev) {
  check_normal(DType::float32, 0, 1, 20);
  check_normal(DType::float64, 1.5, 2, 21);
  check_normal(DType::float16, -3, 0.5, 22);
}

BOOST_AUTO_TEST_CASE(the_same_seed_gives_the_same_sequence_in_two_sessions) {
  for (bool normal : {false, true}) {
    auto first = three_runs(normal, {.seed = 42});
    auto second = three_runs(normal, {.seed = 42});
    BOOST_TEST((first == second), (normal ? "normal" : "uniform"));
    BOOST_TEST((three_runs(normal, {.seed = 42, .seed2 = 5}) == three_runs(normal, {.seed = 42, .seed2 = 5})));
    BOOST_TEST((three_runs(normal, {.seed2 = 9}) == three_runs(normal, {.seed2 = 9})));
  }
}

BOOST_AUTO_TEST_CASE(different_seeds_give_different_sequences) {
  for (bool normal : {false, true}) {
    BOOST_TEST((three_runs(normal, {.seed = 42}) != three_runs(normal, {.seed = 43})));
    BOOST_TEST((three_runs(normal, {.seed = 42}) != three_runs(normal, {.seed = 42, .seed2 = 1})));
  }
}

BOOST_AUTO_TEST_CASE(successive_runs_of_one_node_give_different_values) {
  for (bool normal : {false, true})
    for (ops::RandomOptions options : {ops::RandomOptions{.seed = 42}, ops::RandomOptions{}}) {
      auto runs = three_runs(normal, options);
      BOOST_TEST((runs[0] != runs[1]));
      BOOST_TEST((runs[1] != runs[2]));
      BOOST_TEST((runs[0] != runs[2]));
    }
}

BOOST_AUTO_TEST_CASE(without_a_seed_two_sessions_give_different_sequences) {
  BOOST_TEST((three_runs(false, {}) != three_runs(false, {})));
  BOOST_TEST((three_runs(true, {}) != three_runs(true, {})));
}

BOOST_AUTO_TEST_CASE(random_ops_refuse_integer_dtypes_at_graph_build_time) {
  auto root = Scope::root();
  auto m = error_of([&] { ops::random_uniform(root.with_op_name("ints"), Shape{3}, DType::int32); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "RandomUniform 'ints'"), m);
  BOOST_TEST(contains(m, "int32"), m);
  m = error_of([&] { ops::random_normal(root, Shape{3}, DType::boolean); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "bool"), m);
}

// With a counter, a run's values depend on (seed, seed2, counter) alone: a fresh session fed
// counter 2 first draws what another drew at its third run with counter 2 (a resumed run), and
// each counter gives other values.
BOOST_AUTO_TEST_CASE(with_a_counter_each_runs_values_depend_on_the_seeds_and_the_counter_alone) {
  for (bool normal : {false, true}) {
    auto root = Scope::root();
    auto counter = ops::placeholder(root, DType::int64, Shape{});
    ops::RandomOptions options{.seed = 42, .seed2 = 3, .counter = counter};
    auto y = normal ? ops::random_normal(root, Shape{15}, DType::float64, 0, 1, options)
                    : ops::random_uniform(root, Shape{15}, DType::float64, 0, 1, options);
    auto at = [&](Session& s, int64_t c) { return as_doubles(s.run({{counter, Tensor::scalar<int64_t>(c)}}, {y})[0]); };
    Session first(root);
    std::vector<std::vector<double>> runs;
    for (int64_t c : {0, 1, 2}) runs.push_back(at(first, c));
    BOOST_TEST((runs[0] != runs[1] && runs[1] != runs[2] && runs[0] != runs[2]), "each counter its own values");
    Session resumed(root);
    BOOST_TEST((at(resumed, 2) == runs[2]), (normal ? "normal" : "uniform") << ": counter 2 in a fresh session");
    BOOST_TEST((at(resumed, 0) == runs[0]), "and counter 0 after it");
    BOOST_TEST((at(first, 1) == runs[1]), "the same counter again in the same session");
  }
  auto root = Scope::root();
  auto wrong = ops::placeholder(root, DType::int32, Shape{});
  auto m = error_of([&] { ops::random_uniform(root.with_op_name("u"), Shape{2}, DType::float32, 0, 1, {.seed = 1, .counter = wrong}); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "the counter (input 0) must be an int64 scalar, got int32"), m);
}
