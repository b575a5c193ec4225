// LRN and batch normalisation (oneDNN) against naive loops in double, and their gradients
// against central differences (test/support/gradient_check.hpp: step 1e-2, within 2e-2 relative
// + 2e-3 absolute; both ops are smooth, so the O(h^2) error of the difference stays far below).
// Forward: within 1e-4 relative + 1e-5 absolute.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"
#include "test/ops/gradient_check.hpp"

using namespace troupe;
using troupe::testing::check_gradient_f32;
using troupe::testing::contains;
using troupe::testing::error_of;
using troupe::testing::rand_f32;

namespace {

// float32 kernels against a double reference: within 1e-4 relative + 1e-5 absolute.
void expect_close(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  BOOST_TEST_REQUIRE(got.num_elements() == int64_t(want.size()), what);
  troupe::testing::check_close(got, DType::float32, got.shape(), want, {1e-5, 1e-4}, what);
}

// Per channel of x [N, C, H, W] (H = W = 1 for [N, C]): mean and biased variance.
void channel_stats(const Tensor& x, std::vector<double>& mean, std::vector<double>& var) {
  auto& s = x.shape();
  int64_t n = s[0], c = s[1], inner = x.num_elements() / (n * c);
  mean.assign(std::size_t(c), 0);
  var.assign(std::size_t(c), 0);
  const float* p = x.data<float>();
  for (int64_t k = 0; k < c; ++k) {
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) mean[k] += p[(b * c + k) * inner + i];
    mean[k] /= double(n * inner);
    for (int64_t b = 0; b < n; ++b)
      for (int64_t i = 0; i < inner; ++i) var[k] += std::pow(p[(b * c + k) * inner + i] - mean[k], 2);
    var[k] /= double(n * inner);
  }
}

std::vector<double> naive_batch_norm(const Tensor& x, const Tensor& scale, const Tensor& offset,
                                     const std::vector<double>& mean, const std::vector<double>& var, double eps) {
  auto& s = x.shape();
  int64_t n = s[0], c = s[1], inner = x.num_elements() / (n * c);
  std::vector<double> y(std::size_t(x.num_elements()));
  for (int64_t b = 0; b < n; ++b)
    for (int64_t k = 0; k < c; ++k)
      for (int64_t i = 0; i < inner; ++i) {
        int64_t at = (b * c + k) * inner + i;
        y[std::size_t(at)] = scale.data<float>()[k] * (x.data<float>()[at] - mean[k]) / std::sqrt(var[k] + eps) +
                             offset.data<float>()[k];
      }
  return y;
}

}  // namespace

BOOST_AUTO_TEST_CASE(lrn_matches_tensorflows_definition_across_channels) {
  ops::LrnOptions o{.depth_radius = 2, .bias = 2.0, .alpha = 1e-1, .beta = 0.75};
  Shape shape{2, 7, 3, 4};
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, shape);
  auto y = ops::lrn(root, x, o);
  auto xv = rand_f32(shape, -2, 2);
  std::vector<double> want;
  const float* p = xv.data<float>();
  for (int64_t n = 0; n < 2; ++n)
    for (int64_t c = 0; c < 7; ++c)
      for (int64_t i = 0; i < 12; ++i) {
        double sum = 0;
        for (int64_t k = std::max<int64_t>(0, c - 2); k <= std::min<int64_t>(6, c + 2); ++k)
          sum += std::pow(p[(n * 7 + k) * 12 + i], 2);
        want.push_back(p[(n * 7 + c) * 12 + i] / std::pow(o.bias + o.alpha * sum, o.beta));
      }
  Session s(root);
  expect_close(s.run({{x, xv}}, {y})[0], want, "radius 2");
}

BOOST_AUTO_TEST_CASE(gradients_of_lrn_match_central_differences) {
  check_gradient_f32([](const Scope& s, const std::vector<Output>& x) {
                       return ops::lrn(s, x[0], {.depth_radius = 2, .bias = 1.0, .alpha = 0.2, .beta = 0.75});
                     },
                     {rand_f32({2, 6, 2, 3}, -2, 2)}, "radius 2, beta 0.75");
  check_gradient_f32([](const Scope& s, const std::vector<Output>& x) { return ops::lrn(s, x[0]); },
                     {rand_f32({1, 12, 2, 2})}, "TensorFlow's defaults");
}

BOOST_AUTO_TEST_CASE(batch_norm_in_training_normalises_with_the_batch_statistics_and_returns_them) {
  for (Shape shape : {Shape{4, 3, 2, 5}, Shape{6, 4}}) {
    auto root = Scope::root();
    int64_t c = shape[1];
    auto x = ops::placeholder(root, DType::float32, shape);
    auto scale = ops::placeholder(root, DType::float32, {c});
    auto offset = ops::placeholder(root, DType::float32, {c});
    auto unused = ops::constant(root, Tensor::zeros(DType::float32, {c}));
    auto bn = ops::batch_norm(root, x, scale, offset, unused, unused, {.epsilon = 1e-3, .is_training = true});
    auto xv = rand_f32(shape, -1, 3), sv = rand_f32({c}, 0.5, 2), ov = rand_f32({c});
    std::vector<double> mean, var;
    channel_stats(xv, mean, var);
    Session s(root);
    auto out = s.run({{x, xv}, {scale, sv}, {offset, ov}}, {bn.y, bn.batch_mean, bn.batch_variance});
    expect_close(out[0], naive_batch_norm(xv, sv, ov, mean, var, 1e-3), "y " + shape.to_string());
    expect_close(out[1], mean, "mean " + shape.to_string());
    const double m = double(xv.num_elements() / c);
    std::vector<double> unbiased;
    for (double v : var) unbiased.push_back(v * m / (m - 1));
    expect_close(out[2], unbiased, "variance " + shape.to_string());
  }
}

BOOST_AUTO_TEST_CASE(batch_norm_in_inference_uses_the_given_statistics) {
  Shape shape{2, 3, 2, 2};
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, shape);
  auto xv = rand_f32(shape), sv = rand_f32({3}, 0.5, 2), ov = rand_f32({3}), mv = rand_f32({3}), vv = rand_f32({3}, 0.5, 2);
  auto bn = ops::batch_norm(root, x, ops::constant(root, sv), ops::constant(root, ov), ops::constant(root, mv),
                            ops::constant(root, vv), {.epsilon = 1e-2, .is_training = false});
  std::vector<double> mean(mv.data<float>(), mv.data<float>() + 3), var(vv.data<float>(), vv.data<float>() + 3);
  Session s(root);
  auto out = s.run({{x, xv}}, {bn.y, bn.batch_mean});
  expect_close(out[0], naive_batch_norm(xv, sv, ov, mean, var, 1e-2), "y");
  expect_close(out[1], mean, "mean passed through");
}

BOOST_AUTO_TEST_CASE(gradients_of_batch_norm_match_central_differences_in_both_modes) {
  for (bool training : {true, false}) {
    auto moments = rand_f32({3}, 0.5, 1.5);
    check_gradient_f32([&](const Scope& s, const std::vector<Output>& in) {
                         auto stat = ops::constant(s, moments);
                         return ops::batch_norm(s, in[0], in[1], in[2], stat, stat, {.is_training = training}).y;
                       },
                       {rand_f32({3, 3, 2, 2}, -1, 2), rand_f32({3}, 0.5, 2), rand_f32({3})},
                       training ? "training" : "inference");
  }
}

BOOST_AUTO_TEST_CASE(a_scale_with_the_wrong_channel_count_is_refused_when_built) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, {8, 16, 4, 4});
  auto v = ops::placeholder(root, DType::float32, {12});
  auto m = error_of([&] { ops::batch_norm(root.with_op_name("bn1"), x, v, v, v, v); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "'bn1'"), m);
  BOOST_TEST(contains(m, "[12]"), m);
  BOOST_TEST(contains(m, "16 channels"), m);
}

BOOST_AUTO_TEST_CASE(an_lrn_with_a_negative_radius_or_a_non_nchw_input_is_refused_naming_the_node) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, {2, 8, 4, 4});
  auto m = error_of([&] { ops::lrn(root.with_op_name("norm1"), x, {.depth_radius = -1}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "'norm1'"), m);
  BOOST_TEST(contains(m, "depth_radius"), m);
  auto flat = ops::placeholder(root, DType::float32, {2, 8});
  m = error_of([&] { ops::lrn(root.with_op_name("norm2"), flat); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "[2,8]"), m);
}
