#pragma once
// Central-difference checks of float32 gradients through a real Session: loss = sum(w * f(x))
// with w fixed and random, d loss / d x from gradients() against (loss(x+h) - loss(x-h)) / 2h
// element by element.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "actors/session.hpp"
#include "graph/gradients.hpp"
#include "ops/all.hpp"

namespace troupe::testing {

inline std::mt19937& test_rng() {
  static std::mt19937 rng(21);
  return rng;
}

inline Tensor rand_f32(Shape s, float lo = -1, float hi = 1) {
  std::uniform_real_distribution<float> u(lo, hi);
  Tensor t(DType::float32, s);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = u(test_rng());
  return t;
}

struct GradientTolerance {
  float step = 1e-2f;
  double absolute = 2e-3;
  double relative = 2e-2;
};

inline void check_gradient_f32(const std::function<Output(const Scope&, const std::vector<Output>&)>& f,
                               std::vector<Tensor> values, const std::string& what, GradientTolerance tol = {}) {
  BOOST_TEST_CONTEXT(what) {
    auto root = Scope::root();
    std::vector<Output> xs;
    for (auto& v : values) xs.push_back(ops::placeholder(root, DType::float32, v.shape()));
    auto y = f(root, xs);
    auto w = ops::constant(root, rand_f32(y.shape().to_shape()));
    auto loss = ops::sum(root, ops::mul(root, y, w));
    auto grads = gradients(root, {loss}, xs);
    Session s(root);
    FeedList feeds;
    for (std::size_t i = 0; i < xs.size(); ++i) feeds.push_back({xs[i], values[i]});
    std::vector<TensorName> fetches(grads.begin(), grads.end());
    auto analytic = s.run(feeds, fetches);
    for (std::size_t i = 0; i < xs.size(); ++i)
      for (int64_t j = 0; j < values[i].num_elements(); ++j) {
        auto eval = [&](float delta) {
          FeedList moved = feeds;
          Tensor v = values[i].copy();
          v.data<float>()[j] += delta;
          moved[i].second = v;
          return double(s.run(moved, {loss})[0].scalar_value<float>());
        };
        double numeric = (eval(tol.step) - eval(-tol.step)) / (2 * double(tol.step));
        double got = analytic[i].data<float>()[j];
        BOOST_TEST(std::abs(got - numeric) <= tol.absolute + tol.relative * std::abs(numeric),
                   "input " << i << " element " << j << ": analytic " << got << ", numeric " << numeric);
      }
  }
}

}  // namespace troupe::testing
