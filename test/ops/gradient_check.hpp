#pragma once
// A gradient checker for float64 ops: builds y = f(inputs), loss = sum(y) (or y if scalar),
// and compares d loss / d input from troupe::gradients with central differences:
// |analytic - numeric| <= 1e-6 + 1e-6 * |numeric|, step h = 1e-6 (truncation error of order
// h^2 times the third derivative, rounding of order eps / h: both far below the tolerance).
#include <boost/test/unit_test.hpp>

#include <functional>
#include <random>

#include "actors/session.hpp"
#include "ops/all.hpp"

namespace troupe::testing {

using Builder = std::function<Output(const Scope&, const std::vector<Output>&)>;

inline Tensor random_tensor(Shape shape, std::mt19937& rng, double lo, double hi) {
  std::uniform_real_distribution<double> u(lo, hi);
  Tensor t(DType::float64, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<double>()[i] = u(rng);
  return t;
}

inline void check_gradient(const Builder& f, std::vector<Tensor> values, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    auto root = Scope::root();
    std::vector<Output> xs;
    for (auto& v : values) xs.push_back(ops::placeholder(root, DType::float64, v.shape()));
    auto y = f(root, xs);
    auto loss = y.shape().rank() == 0 ? y : ops::sum(root, y);
    auto grads = gradients(root, {loss}, xs);
    Session session(root);
    FeedList feeds;
    for (std::size_t i = 0; i < xs.size(); ++i) feeds.push_back({xs[i], values[i]});
    std::vector<TensorName> fetches;
    for (auto& g : grads) {
      BOOST_REQUIRE(g);
      fetches.push_back(g);
    }
    auto analytic = session.run(feeds, fetches);
    const double h = 1e-6;
    for (std::size_t i = 0; i < xs.size(); ++i) {
      BOOST_TEST(analytic[i].shape() == values[i].shape(), "gradient shape of input " << i);
      for (int64_t j = 0; j < values[i].num_elements(); ++j) {
        auto eval = [&](double delta) {
          FeedList moved = feeds;
          Tensor v = values[i].copy();
          v.data<double>()[j] += delta;
          moved[i].second = v;
          return session.run(moved, {loss})[0].scalar_value<double>();
        };
        double numeric = (eval(h) - eval(-h)) / (2 * h);
        double got = analytic[i].data<double>()[j];
        BOOST_TEST(std::abs(got - numeric) <= 1e-6 + 1e-6 * std::abs(numeric),
                   "input " << i << " element " << j << ": analytic " << got << ", numeric " << numeric);
      }
    }
  }
}

}  // namespace troupe::testing
