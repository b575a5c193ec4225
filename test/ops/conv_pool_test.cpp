// Conv2D, MaxPool and AvgPool (oneDNN) against naive loops, and their gradients against central
// differences. float32: forward within 1e-4 relative + 1e-5 absolute of the double reference;
// gradients of loss = sum(w * y) (w fixed and random) within 2e-2 relative + 2e-3 absolute,
// step 1e-2 (conv and avg-pool are linear, so the difference quotient is exact up to rounding;
// max-pool inputs are spread so that no step moves a maximum).
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <algorithm>
#include <numeric>
#include <random>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"
#include "test/ops/gradient_check.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

using troupe::testing::check_gradient_f32;
using troupe::testing::rand_f32;

struct ConvCase {
  Shape in, filter;
  ops::Conv2DOptions o;
  std::string what;
};

// Naive NCHW convolution with TensorFlow's padding.
std::vector<double> naive_conv(const Tensor& x, const Tensor& f, const ops::Conv2DOptions& o, Shape& out) {
  auto& s = x.shape();
  auto& k = f.shape();
  Window h = window(s[2], k[2], o.strides[0], o.dilations[0], o.padding, o.explicit_paddings[0], o.explicit_paddings[1]);
  Window w = window(s[3], k[3], o.strides[1], o.dilations[1], o.padding, o.explicit_paddings[2], o.explicit_paddings[3]);
  out = Shape{s[0], k[0], h.out, w.out};
  std::vector<double> y(std::size_t(out.num_elements()), 0.0);
  const float* px = x.data<float>();
  const float* pf = f.data<float>();
  for (int64_t n = 0; n < s[0]; ++n)
    for (int64_t oc = 0; oc < k[0]; ++oc)
      for (int64_t oy = 0; oy < h.out; ++oy)
        for (int64_t ox = 0; ox < w.out; ++ox) {
          double acc = 0;
          for (int64_t c = 0; c < s[1]; ++c)
            for (int64_t ky = 0; ky < k[2]; ++ky)
              for (int64_t kx = 0; kx < k[3]; ++kx) {
                int64_t iy = oy * o.strides[0] - h.pad_before + ky * o.dilations[0];
                int64_t ix = ox * o.strides[1] - w.pad_before + kx * o.dilations[1];
                if (iy < 0 || iy >= s[2] || ix < 0 || ix >= s[3]) continue;
                acc += double(px[((n * s[1] + c) * s[2] + iy) * s[3] + ix]) *
                       double(pf[((oc * k[1] + c) * k[2] + ky) * k[3] + kx]);
              }
          y[std::size_t(((n * k[0] + oc) * h.out + oy) * w.out + ox)] = acc;
        }
  return y;
}

// float32 kernels against a double reference: within 1e-4 relative + 1e-5 absolute.
void expect_close(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  BOOST_TEST_REQUIRE(got.num_elements() == int64_t(want.size()), what);
  troupe::testing::check_close(got, DType::float32, got.shape(), want, {1e-5, 1e-4}, what);
}

}  // namespace

BOOST_AUTO_TEST_CASE(conv2d_matches_a_naive_convolution_for_strides_paddings_and_dilations) {
  std::vector<ConvCase> cases = {
      {{2, 3, 7, 6}, {4, 3, 3, 3}, {}, "3x3 SAME stride 1"},
      {{1, 2, 9, 8}, {3, 2, 5, 5}, {.strides = {2, 2}}, "5x5 SAME stride 2, odd sizes"},
      {{2, 1, 8, 8}, {2, 1, 3, 2}, {.padding = "VALID"}, "3x2 VALID"},
      {{1, 2, 6, 7}, {2, 2, 3, 3}, {.padding = "EXPLICIT", .explicit_paddings = {1, 0, 2, 1}}, "explicit"},
      {{1, 2, 9, 9}, {2, 2, 3, 3}, {.dilations = {2, 2}}, "dilation 2"},
      {{4, 1, 28, 28}, {32, 1, 5, 5}, {}, "LeNet's first layer"},
  };
  for (auto& c : cases) {
    auto root = Scope::root();
    auto x = ops::placeholder(root, DType::float32, c.in);
    auto f = ops::placeholder(root, DType::float32, c.filter);
    auto y = ops::conv2d(root, x, f, c.o);
    auto xv = rand_f32(c.in), fv = rand_f32(c.filter);
    Shape out;
    auto want = naive_conv(xv, fv, c.o, out);
    BOOST_TEST(y.shape().to_string() == out.to_string(), c.what);
    Session s(root);
    expect_close(s.run({{x, xv}, {f, fv}}, {y})[0], want, c.what);
  }
}

BOOST_AUTO_TEST_CASE(gradients_of_conv2d_match_central_differences) {
  check_gradient_f32([](const Scope& s, const std::vector<Output>& x) { return ops::conv2d(s, x[0], x[1]); },
                     {rand_f32({2, 2, 5, 4}), rand_f32({3, 2, 3, 3})}, "SAME stride 1");
  check_gradient_f32([](const Scope& s, const std::vector<Output>& x) {
                       return ops::conv2d(s, x[0], x[1], {.strides = {2, 1}, .padding = "VALID", .dilations = {1, 2}});
                     },
                     {rand_f32({1, 2, 7, 7}), rand_f32({2, 2, 2, 3})}, "VALID, stride 2x1, dilation 1x2");
}

BOOST_AUTO_TEST_CASE(a_filter_with_the_wrong_channel_count_is_refused_when_built) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, {8, 3, 28, 28});
  auto f = ops::placeholder(root, DType::float32, {32, 4, 5, 5});
  auto m = error_of([&] { ops::conv2d(root.with_op_name("conv1"), x, f); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "Conv2D 'conv1'"), m);
  BOOST_TEST(contains(m, "3 channels"), m);
  BOOST_TEST(contains(m, "[8,3,28,28]"), m);
}

BOOST_AUTO_TEST_CASE(pooling_matches_naive_max_and_average) {
  for (auto [padding, size] : std::vector<std::pair<std::string, int>>{{"VALID", 8}, {"SAME", 7}}) {
    auto root = Scope::root();
    auto x = ops::placeholder(root, DType::float32, {2, 3, size, size});
    ops::PoolOptions o{.ksize = {3, 3}, .strides = {2, 2}, .padding = padding};
    auto mx = ops::max_pool(root, x, o);
    auto av = ops::avg_pool(root, x, o);
    auto xv = rand_f32({2, 3, size, size});
    Window w = window(size, 3, 2, 1, padding, 0, 0);
    std::vector<double> want_max, want_avg;
    for (int nc = 0; nc < 6; ++nc)
      for (int64_t oy = 0; oy < w.out; ++oy)
        for (int64_t ox = 0; ox < w.out; ++ox) {
          double m = -1e30, sum = 0;
          int count = 0;
          for (int ky = 0; ky < 3; ++ky)
            for (int kx = 0; kx < 3; ++kx) {
              int64_t iy = oy * 2 - w.pad_before + ky, ix = ox * 2 - w.pad_before + kx;
              if (iy < 0 || iy >= size || ix < 0 || ix >= size) continue;
              double v = xv.data<float>()[(nc * size + iy) * size + ix];
              m = std::max(m, v);
              sum += v;
              ++count;
            }
          want_max.push_back(m);
          want_avg.push_back(sum / count);
        }
    Session s(root);
    auto out = s.run({{x, xv}}, {mx, av});
    expect_close(out[0], want_max, "max " + padding);
    expect_close(out[1], want_avg, "avg " + padding);
  }
}

BOOST_AUTO_TEST_CASE(gradients_of_pooling_match_central_differences) {
  // Distinct values 0.1 apart: a step of 0.01 never changes which element is the maximum.
  Tensor spread(DType::float32, Shape{1, 2, 5, 5});
  std::vector<int> order(50);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), troupe::testing::test_rng());
  for (int i = 0; i < 50; ++i) spread.data<float>()[i] = 0.1f * float(order[i]);
  for (std::string padding : {"VALID", "SAME"}) {
    ops::PoolOptions o{.ksize = {2, 2}, .strides = {2, 2}, .padding = padding};
    check_gradient_f32([=](const Scope& s, const std::vector<Output>& x) { return ops::max_pool(s, x[0], o); }, {spread},
                       "max " + padding);
    check_gradient_f32([=](const Scope& s, const std::vector<Output>& x) { return ops::avg_pool(s, x[0], o); },
                       {rand_f32({1, 2, 5, 5})}, "avg " + padding);
  }
}

BOOST_AUTO_TEST_CASE(a_pooling_window_larger_than_its_input_is_refused_naming_the_node) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, {1, 3, 2, 2});
  auto m = error_of([&] { ops::max_pool(root.with_op_name("pool1"), x, {.ksize = {3, 3}, .strides = {1, 1}}); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "'pool1'"), m);
  BOOST_TEST(contains(m, "3x3"), m);
  BOOST_TEST(contains(m, "[1,3,2,2]"), m);
}

namespace {

// Naive pooling with explicit paddings (top, bottom, left, right): the maximum of the input
// elements in each window, or their sum over the count of them (or over the whole window).
std::vector<double> naive_pool(const Tensor& x, const ops::PoolOptions& o, bool max, Shape& out) {
  auto& s = x.shape();
  auto& p = o.explicit_paddings;
  Window h = window(s[2], o.ksize[0], o.strides[0], 1, "EXPLICIT", p[0], p[1]);
  Window w = window(s[3], o.ksize[1], o.strides[1], 1, "EXPLICIT", p[2], p[3]);
  out = Shape{s[0], s[1], h.out, w.out};
  std::vector<double> y;
  for (int64_t nc = 0; nc < s[0] * s[1]; ++nc)
    for (int64_t oy = 0; oy < h.out; ++oy)
      for (int64_t ox = 0; ox < w.out; ++ox) {
        double m = -1e30, sum = 0;
        int64_t count = 0;
        for (int64_t ky = 0; ky < o.ksize[0]; ++ky)
          for (int64_t kx = 0; kx < o.ksize[1]; ++kx) {
            int64_t iy = oy * o.strides[0] - p[0] + ky, ix = ox * o.strides[1] - p[2] + kx;
            if (iy < 0 || iy >= s[2] || ix < 0 || ix >= s[3]) continue;
            double v = x.data<float>()[(nc * s[2] + iy) * s[3] + ix];
            m = std::max(m, v);
            sum += v;
            ++count;
          }
        if (max) y.push_back(m);
        else y.push_back(sum / double(o.count_include_pad ? o.ksize[0] * o.ksize[1] : count));
      }
  return y;
}

}  // namespace

BOOST_AUTO_TEST_CASE(pooling_with_explicit_padding_matches_a_naive_reference_for_both_average_conventions) {
  const std::vector<std::pair<ops::PoolOptions, std::string>> cases = {
      {{.ksize = {3, 3}, .strides = {2, 2}, .padding = "EXPLICIT", .explicit_paddings = {1, 1, 1, 1}},
       "3x3/2 pad 1 (ResNet's stem pool)"},
      {{.ksize = {3, 2}, .strides = {1, 2}, .padding = "EXPLICIT", .explicit_paddings = {2, 0, 1, 1}},
       "3x2, strides 1x2, asymmetric padding"},
      {{.ksize = {2, 2}, .strides = {2, 2}, .padding = "EXPLICIT", .explicit_paddings = {1, 1, 1, 1}},
       "2x2/2 pad 1: corner windows hold one element"},
  };
  for (auto& [base, what] : cases)
    for (bool include : {false, true}) {
      auto o = base;
      o.count_include_pad = include;
      const std::string name = what + (include ? ", padding counted" : ", padding left out");
      auto root = Scope::root();
      auto x = ops::placeholder(root, DType::float32, {2, 3, 7, 6});
      ops::PoolOptions max_options = o;
      max_options.count_include_pad = false;
      auto mx = ops::max_pool(root, x, max_options);
      auto av = ops::avg_pool(root, x, o);
      auto xv = rand_f32({2, 3, 7, 6});
      Shape out;
      auto want_max = naive_pool(xv, o, true, out);
      auto want_avg = naive_pool(xv, o, false, out);
      BOOST_TEST(mx.shape().to_string() == out.to_string(), name);
      BOOST_TEST(av.shape().to_string() == out.to_string(), name);
      Session s(root);
      auto got = s.run({{x, xv}}, {mx, av});
      expect_close(got[0], want_max, "max " + name);
      expect_close(got[1], want_avg, "avg " + name);
    }
}

BOOST_AUTO_TEST_CASE(gradients_of_pooling_with_explicit_padding_match_central_differences) {
  Tensor spread(DType::float32, Shape{1, 2, 5, 5});
  std::vector<int> order(50);
  std::iota(order.begin(), order.end(), 0);
  std::shuffle(order.begin(), order.end(), troupe::testing::test_rng());
  // Negative values too: a padded position must never win the maximum.
  for (int i = 0; i < 50; ++i) spread.data<float>()[i] = 0.1f * float(order[i]) - 3.0f;
  ops::PoolOptions o{.ksize = {3, 3}, .strides = {2, 2}, .padding = "EXPLICIT", .explicit_paddings = {1, 1, 2, 0}};
  check_gradient_f32([=](const Scope& s, const std::vector<Output>& x) { return ops::max_pool(s, x[0], o); }, {spread},
                     "max, explicit");
  for (bool include : {false, true}) {
    auto a = o;
    a.count_include_pad = include;
    check_gradient_f32([=](const Scope& s, const std::vector<Output>& x) { return ops::avg_pool(s, x[0], a); },
                       {rand_f32({1, 2, 5, 5})}, include ? "avg, explicit, padding counted" : "avg, explicit");
  }
}

BOOST_AUTO_TEST_CASE(an_explicit_pool_padding_as_large_as_the_window_is_refused_naming_the_node) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, {1, 3, 8, 8});
  auto m = error_of(
      [&] {
        ops::avg_pool(root.with_op_name("pool1"), x,
                      {.ksize = {2, 2}, .strides = {2, 2}, .padding = "EXPLICIT", .explicit_paddings = {2, 2, 0, 0}});
      },
      ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "'pool1'"), m);
  BOOST_TEST(contains(m, "[2,2,0,0]"), m);
}
