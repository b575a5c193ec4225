#pragma once
// Gradient checkers: build y = f(inputs) and a scalar loss from it, and compare d loss / d input
// from troupe::gradients with central differences (loss(x+h) - loss(x-h)) / 2h, element by
// element. For float64, truncation (h^2 times the third derivative) and rounding (eps / h) are
// both far below the tolerance.
#include <boost/test/unit_test.hpp>

#include <functional>
#include <random>
#include <type_traits>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "test/ops/op_test.hpp"

namespace troupe::testing {

using Builder = std::function<Output(const Scope&, const std::vector<Output>&)>;

inline std::mt19937& test_rng() {
  static std::mt19937 rng(21);
  return rng;
}


struct GradientTolerance {
  double step, absolute, relative;
};

// loss = sum(y) (or y if scalar) when `weights` is false, sum(w * y) with w fixed and random
// otherwise (so that errors cannot cancel in the sum).
template <class T>
void check_gradient_of(const Builder& f, std::vector<Tensor> values, const std::string& what, bool weights,
                       GradientTolerance tol) {
  BOOST_TEST_CONTEXT(what) {
    const DType dtype = std::is_same_v<T, float> ? DType::float32 : DType::float64;
    auto root = Scope::root();
    std::vector<Output> xs;
    for (auto& v : values) xs.push_back(ops::placeholder(root, dtype, v.shape()));
    auto y = f(root, xs);
    Output loss;
    if (weights) {
      auto w = ops::constant(root, random_tensor(test_rng(), dtype, y.shape().to_shape(), -1, 1));
      loss = ops::sum(root, ops::mul(root, y, w));
    } else {
      loss = y.shape().rank() == 0 ? y : ops::sum(root, y);
    }
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
    for (std::size_t i = 0; i < xs.size(); ++i) {
      BOOST_TEST(analytic[i].shape() == values[i].shape(), "gradient shape of input " << i);
      for (int64_t j = 0; j < values[i].num_elements(); ++j) {
        auto eval = [&](double delta) {
          FeedList moved = feeds;
          Tensor v = values[i].copy();
          v.data<T>()[j] += T(delta);
          moved[i].second = v;
          return double(session.run(moved, {loss})[0].scalar_value<T>());
        };
        double numeric = (eval(tol.step) - eval(-tol.step)) / (2 * tol.step);
        double got = double(analytic[i].data<T>()[j]);
        BOOST_TEST(std::abs(got - numeric) <= tol.absolute + tol.relative * std::abs(numeric),
                   "input " << i << " element " << j << ": analytic " << got << ", numeric " << numeric);
      }
    }
  }
}

// float64: |analytic - numeric| <= 1e-6 + 1e-6 * |numeric|, step 1e-6.
inline void check_gradient(const Builder& f, std::vector<Tensor> values, const std::string& what) {
  check_gradient_of<double>(f, std::move(values), what, false, {1e-6, 1e-6, 1e-6});
}

// float32 kernels (oneDNN): loss = sum(w * y), step 1e-2, within 2e-2 relative + 2e-3 absolute
// (the smooth ops' O(h^2) error stays far below that; rounding of the loss is about 1e-6 / h).
inline void check_gradient_f32(const Builder& f, std::vector<Tensor> values, const std::string& what) {
  check_gradient_of<float>(f, std::move(values), what, true, {1e-2, 2e-3, 2e-2});
}

inline Tensor rand_f32(Shape shape, float lo = -1, float hi = 1) {
  return random_tensor(test_rng(), DType::float32, shape, lo, hi);
}

}  // namespace troupe::testing
