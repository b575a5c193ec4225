// Activations, BiasAdd, Softmax, LogSoftmax and the cross-entropy losses: forward against
// naive float64 references (tolerance 1e-12 relative) and gradients against central differences
// (gradient_check.hpp).
#include <boost/test/unit_test.hpp>

#include <bit>
#include <cmath>

#include "test/ops/gradient_check.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::check_gradient;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

std::mt19937 rng(7);
Tensor r(Shape s, double lo = -2, double hi = 2) { return testing::random_tensor(rng, DType::float64, s, lo, hi); }

void expect_close(const Tensor& got, const std::vector<double>& want, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_REQUIRE(got.num_elements() == int64_t(want.size()));
    for (std::size_t i = 0; i < want.size(); ++i)
      BOOST_TEST(std::abs(got.data<double>()[i] - want[i]) <= 1e-12 * std::max(1.0, std::abs(want[i])),
                 "element " << i);
  }
}

Tensor run1(const std::function<Output(const Scope&, Output)>& f, const Tensor& x) {
  auto root = Scope::root();
  auto p = ops::placeholder(root, x.dtype(), x.shape());
  Session s(root);
  auto y = f(root, p);
  return s.run({{p, x}}, {y})[0];
}

}  // namespace

BOOST_AUTO_TEST_CASE(activations_match_their_formulas) {
  auto x = r({3, 4});
  auto v = x.to_vector<double>();
  auto map = [&](auto f) {
    std::vector<double> out;
    for (double e : v) out.push_back(f(e));
    return out;
  };
  expect_close(run1([](auto& s, auto p) { return ops::relu(s, p); }, x), map([](double e) { return e > 0 ? e : 0; }), "relu");
  expect_close(run1([](auto& s, auto p) { return ops::sigmoid(s, p); }, x), map([](double e) { return 1 / (1 + std::exp(-e)); }), "sigmoid");
  expect_close(run1([](auto& s, auto p) { return ops::tanh(s, p); }, x), map([](double e) { return std::tanh(e); }), "tanh");
  expect_close(run1([](auto& s, auto p) { return ops::elu(s, p); }, x), map([](double e) { return e > 0 ? e : std::exp(e) - 1; }), "elu");
  // float32 too
  auto y = run1([](auto& s, auto p) { return ops::relu(s, p); }, Tensor::from_vector<float>({-1, 0.5f}));
  BOOST_TEST(y.to_vector<float>() == std::vector<float>({0, 0.5f}), boost::test_tools::per_element());
}

// 64 elements or more take the vectorized loops (ops/math/float_loops.hpp), forward and
// backward (XGrad(y, g)); 1,023 leaves a remainder after the vector width.
BOOST_AUTO_TEST_CASE(activations_of_large_float32_tensors_and_their_gradients_match_their_formulas) {
  struct Case {
    const char* name;
    Output (*build)(const Scope&, Output);
    double (*f)(double);
    double (*df)(double y);  // dy/dx, from y
  };
  const Case cases[] = {
      {"relu", ops::relu, [](double x) { return x > 0 ? x : 0.0; }, [](double y) { return y > 0 ? 1.0 : 0.0; }},
      {"sigmoid", ops::sigmoid, [](double x) { return 1 / (1 + std::exp(-x)); }, [](double y) { return y * (1 - y); }},
      {"tanh", ops::tanh, [](double x) { return std::tanh(x); }, [](double y) { return 1 - y * y; }},
      {"elu", ops::elu, [](double x) { return x > 0 ? x : std::expm1(x); }, [](double y) { return y > 0 ? 1.0 : y + 1; }},
  };
  for (const Case& c : cases) {
    auto root = Scope::root();
    const Tensor xv = testing::random_tensor(rng, DType::float32, Shape{33, 31}, -3, 3);
    const Tensor gv = testing::random_tensor(rng, DType::float32, Shape{33, 31}, -2, 2);
    auto x = ops::placeholder(root.with_op_name("x"), DType::float32, xv.shape());
    auto g = ops::placeholder(root.with_op_name("g"), DType::float32, gv.shape());
    auto y = c.build(root.with_op_name(c.name), x);
    auto dx = gradients(root, {y}, {x}, {g})[0];
    Session session(root);
    auto out = session.run({{x, xv}, {g, gv}}, {y, dx});
    const float* px = xv.data<float>();
    const float* pg = gv.data<float>();
    BOOST_TEST_CONTEXT(c.name) {
      for (int64_t i = 0; i < xv.num_elements(); ++i) {
        const double want = c.f(px[i]);
        const double got = out[0].data<float>()[i];
        BOOST_TEST(std::abs(got - want) <= 4e-7 * std::max(1.0, std::abs(want)), "y at " << i << ": " << got << ", want " << want);
        // From the kernel's own y, as XGrad computes it.
        const double dwant = c.df(got) * pg[i];
        const double dgot = out[1].data<float>()[i];
        BOOST_TEST(std::abs(dgot - dwant) <= 1e-6 * std::max(1.0, std::abs(dwant)), "dx at " << i << ": " << dgot << ", want " << dwant);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(float32_tanh_is_within_a_few_ulps_of_libm_everywhere) {
  // The float32 kernel computes tanh itself (vectorized); sweep its ranges and their edges.
  std::vector<float> x = {0.0f, -0.0f, 1e-30f, -1e-20f, 1e-4f, 0.2499999f, 0.25f, 0.2500001f, -0.25f, 0.5f, 1.0f,
                          -3.0f, 8.999f, 9.0f, 9.5f, -20.0f, 1e30f, -1e30f, INFINITY, -INFINITY};
  for (int i = -20000; i <= 20000; ++i) x.push_back(float(i) * 6e-4f);  // -12 .. 12
  for (int i = 1; i <= 2000; ++i) x.push_back(std::ldexp(1.0f, -i % 120) * (i % 2 ? 1.0f : -1.0f));
  auto got = run1([](auto& s, auto p) { return ops::tanh(s, p); }, Tensor::from_vector<float>(x)).to_vector<float>();
  int worst_ulps = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const float want = std::tanh(x[i]);
    const int ulps = std::abs(int(std::bit_cast<int32_t>(got[i]) - std::bit_cast<int32_t>(want)));
    worst_ulps = std::max(worst_ulps, ulps);
    BOOST_TEST(ulps <= 4, "tanh(" << x[i] << "): " << got[i] << ", libm " << want);
    BOOST_TEST(std::signbit(got[i]) == std::signbit(want), "tanh(" << x[i] << ") keeps its sign");
  }
  BOOST_TEST(std::isnan(run1([](auto& s, auto p) { return ops::tanh(s, p); }, Tensor::from_vector<float>({NAN}))
                            .to_vector<float>()[0]));
  BOOST_TEST_MESSAGE("float32 tanh: at most " << worst_ulps << " ulp(s) from libm over " << x.size() << " points");
}

BOOST_AUTO_TEST_CASE(gradients_of_activations_match_central_differences) {
  using V = std::vector<Output>;
  // Keep relu and elu inputs away from the kink at 0.
  auto away = [&](Shape s) {
    auto t = r(s, 0.1, 2);
    for (int64_t i = 0; i < t.num_elements(); i += 2) t.data<double>()[i] *= -1;
    return t;
  };
  check_gradient([](const Scope& s, const V& x) { return ops::mul(s, ops::relu(s, x[0]), x[0]); }, {away({2, 3})}, "relu");
  check_gradient([](const Scope& s, const V& x) { return ops::mul(s, ops::sigmoid(s, x[0]), x[0]); }, {r({2, 3})}, "sigmoid");
  check_gradient([](const Scope& s, const V& x) { return ops::mul(s, ops::tanh(s, x[0]), x[0]); }, {r({2, 3})}, "tanh");
  check_gradient([](const Scope& s, const V& x) { return ops::mul(s, ops::elu(s, x[0]), x[0]); }, {away({2, 3})}, "elu");
}

BOOST_AUTO_TEST_CASE(bias_add_adds_along_the_channel_axis_in_both_layouts) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float64, Shape{2, 3, 2});
  auto b = ops::constant<double>(root, {10, 20, 30}, {3});
  auto nchw = ops::bias_add(root, x, b, "NCHW");
  auto bl = ops::constant<double>(root, {100, 200}, {2});
  auto nhwc = ops::bias_add(root, x, bl, "NHWC");
  Session s(root);
  auto in = Tensor::zeros(DType::float64, {2, 3, 2});
  auto out = s.run({{x, in}}, {nchw, nhwc});
  expect_close(out[0], {10, 10, 20, 20, 30, 30, 10, 10, 20, 20, 30, 30}, "NCHW");
  expect_close(out[1], {100, 200, 100, 200, 100, 200, 100, 200, 100, 200, 100, 200}, "NHWC");
  auto m = error_of([&] { ops::bias_add(root, x, ops::constant<double>(root, {1, 2}, {2}), "NCHW"); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "3 channels"), m);
}

BOOST_AUTO_TEST_CASE(gradients_of_bias_add_match_central_differences) {
  using V = std::vector<Output>;
  auto sq = [](const Scope& s, Output y) { return ops::mul(s, y, y); };
  check_gradient([=](const Scope& s, const V& x) { return sq(s, ops::bias_add(s, x[0], x[1])); }, {r({2, 3, 2, 2}), r({3})}, "NCHW");
  check_gradient([=](const Scope& s, const V& x) { return sq(s, ops::bias_add(s, x[0], x[1], "NHWC")); }, {r({2, 2, 3}), r({3})}, "NHWC");
  check_gradient([=](const Scope& s, const V& x) { return sq(s, ops::bias_add(s, x[0], x[1])); }, {r({4, 3}), r({3})}, "NC");
}

// 64 elements or more of float32 take the vectorized loops (bias_add.cpp): a Dense layer's
// [batch, units] (one element of each channel a row), NCHW (a channel's run of h * w) and NHWC,
// with remainders after the vector width. The sum against a naive float64 one over the same
// float32 values.
BOOST_AUTO_TEST_CASE(bias_add_and_its_gradient_of_large_float32_tensors_match_a_naive_float64_reference) {
  struct Case {
    Shape shape;
    const char* format;
    int axis;
  };
  for (const Case& c : {Case{{33, 70}, "NCHW", 1}, Case{{5, 6, 7, 9}, "NCHW", 1}, Case{{5, 7, 9, 6}, "NHWC", 3}}) {
    const int64_t channels = c.shape[c.axis];
    const Tensor xv = testing::random_tensor(rng, DType::float32, c.shape, -3, 3);
    const Tensor bv = testing::random_tensor(rng, DType::float32, Shape{channels}, -3, 3);
    auto root = Scope::root();
    auto x = ops::placeholder(root.with_op_name("x"), DType::float32, c.shape);
    auto b = ops::placeholder(root.with_op_name("b"), DType::float32, Shape{channels});
    auto y = ops::bias_add(root, x, b, c.format);
    Output db(&root.add("BiasAddGrad", {x}, {{"data_format", std::string(c.format)}}));
    Session session(root);
    auto out = session.run({{x, xv}, {b, bv}}, {y, db});
    // Element i's channel: its index along the channel axis.
    int64_t inner = 1;
    for (int d = c.axis + 1; d < c.shape.rank(); ++d) inner *= c.shape[d];
    std::vector<double> sums(std::size_t(channels), 0.0);
    const float* px = xv.data<float>();
    BOOST_TEST_CONTEXT(c.shape.to_string() << " " << c.format) {
      for (int64_t i = 0; i < xv.num_elements(); ++i) {
        const int64_t ch = (i / inner) % channels;
        // A float32 sum, correctly rounded: exactly the float64 sum rounded.
        BOOST_TEST(out[0].data<float>()[i] == float(double(px[i]) + double(bv.data<float>()[ch])), "y at " << i);
        sums[std::size_t(ch)] += px[i];
      }
      BOOST_TEST_REQUIRE(out[1].shape() == Shape{channels});
      // Summed in float64 too, in another order: the same after the rounding to float32 but for
      // a last bit.
      for (int64_t ch = 0; ch < channels; ++ch) {
        const double got = out[1].data<float>()[ch], want = sums[std::size_t(ch)];
        BOOST_TEST(std::abs(got - want) <= 1.2e-7 * std::max(1.0, std::abs(want)), "channel " << ch << ": " << got << ", want " << want);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(softmax_rows_sum_to_one_and_match_the_formula) {
  auto x = r({3, 5}, -30, 30);  // large logits: the stable form must not overflow
  auto y = run1([](auto& s, auto p) { return ops::softmax(s, p); }, x);
  auto ly = run1([](auto& s, auto p) { return ops::log_softmax(s, p); }, x);
  for (int row = 0; row < 3; ++row) {
    const double* in = x.data<double>() + row * 5;
    double m = *std::max_element(in, in + 5), z = 0;
    for (int j = 0; j < 5; ++j) z += std::exp(in[j] - m);
    double total = 0;
    for (int j = 0; j < 5; ++j) {
      double want = std::exp(in[j] - m) / z;
      BOOST_TEST(std::abs(y.data<double>()[row * 5 + j] - want) <= 1e-12);
      BOOST_TEST(std::abs(ly.data<double>()[row * 5 + j] - std::log(want)) <= 1e-9);
      total += y.data<double>()[row * 5 + j];
    }
    BOOST_TEST(std::abs(total - 1) <= 1e-12);
  }
}

BOOST_AUTO_TEST_CASE(gradients_of_softmax_and_log_softmax_match_central_differences) {
  using V = std::vector<Output>;
  auto w = r({2, 4});
  auto weighted = [&](const Scope& s, Output y) { return ops::mul(s, y, ops::constant(s, w)); };
  check_gradient([&](const Scope& s, const V& x) { return weighted(s, ops::softmax(s, x[0])); }, {r({2, 4})}, "softmax");
  check_gradient([&](const Scope& s, const V& x) { return weighted(s, ops::log_softmax(s, x[0])); }, {r({2, 4})}, "log_softmax");
}

BOOST_AUTO_TEST_CASE(sparse_cross_entropy_is_minus_log_softmax_at_the_label) {
  auto root = Scope::root();
  auto logits = ops::placeholder(root, DType::float64, Shape{3, 4});
  auto labels = ops::placeholder(root, DType::int32, Shape{3});
  auto loss = ops::sparse_softmax_cross_entropy_with_logits(root, logits, labels);
  auto dense = ops::softmax_cross_entropy_with_logits(
      root, logits, ops::constant<double>(root, {0, 1, 0, 0, 0, 0, 0, 1, 1, 0, 0, 0}, {3, 4}));
  Session s(root);
  auto x = r({3, 4});
  auto out = s.run({{logits, x}, {labels, Tensor::from_vector<int32_t>({1, 3, 0})}}, {loss, dense});
  int label[3] = {1, 3, 0};
  for (int row = 0; row < 3; ++row) {
    const double* in = x.data<double>() + row * 4;
    double m = *std::max_element(in, in + 4), z = 0;
    for (int j = 0; j < 4; ++j) z += std::exp(in[j] - m);
    double want = -(in[label[row]] - m - std::log(z));
    BOOST_TEST(std::abs(out[0].data<double>()[row] - want) <= 1e-12);
    BOOST_TEST(std::abs(out[1].data<double>()[row] - want) <= 1e-12);
  }
  auto m = error_of([&] { s.run({{logits, x}, {labels, Tensor::from_vector<int32_t>({1, 7, 0})}}, {loss}); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "label 7 at row 1"), m);
  BOOST_TEST(contains(m, "SparseSoftmaxCrossEntropyWithLogits"), m);
}

BOOST_AUTO_TEST_CASE(gradients_of_cross_entropy_losses_match_central_differences) {
  using V = std::vector<Output>;
  check_gradient(
      [](const Scope& s, const V& x) {
        return ops::mean(s, ops::sparse_softmax_cross_entropy_with_logits(
                                s, x[0], ops::constant<int64_t>(s, {2, 0, 1}, {3})));
      },
      {r({3, 4})}, "sparse, mean over the batch");
  auto p = r({3, 4}, 0.1, 1);
  check_gradient([&](const Scope& s, const V& x) { return ops::softmax_cross_entropy_with_logits(s, x[0], x[1]); },
                 {r({3, 4}), p}, "dense, both inputs");
}

namespace {

// float32 rows [c, c - 1] for each c: c - 1 is exact up to 2^24, so a kernel that subtracts
// the row maximum first sees the same differences (0 and -1) for every c.
Tensor shifted_rows(std::initializer_list<float> offsets) {
  std::vector<float> v;
  for (float c : offsets) v.insert(v.end(), {c, c - 1});
  return Tensor::from_vector<float>(v, Shape{int64_t(offsets.size()), 2});
}

// Every row of a [rows, k] float32 tensor equals its first row exactly.
void expect_rows_equal_the_first(const Tensor& t, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    const int64_t k = t.shape()[1];
    const float* p = t.data<float>();
    for (int64_t r = 1; r < t.shape()[0]; ++r)
      for (int64_t j = 0; j < k; ++j)
        BOOST_TEST(p[r * k + j] == p[j], "row " << r << " column " << j << ": " << p[r * k + j] << " vs " << p[j]);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(softmax_and_log_softmax_of_large_float32_logits_match_those_of_the_shifted_logits) {
  auto x = shifted_rows({0, 1e4f, 1e5f, 1e6f});
  auto y = run1([](auto& s, auto p) { return ops::softmax(s, p); }, x);
  auto ly = run1([](auto& s, auto p) { return ops::log_softmax(s, p); }, x);
  expect_rows_equal_the_first(y, "softmax");
  expect_rows_equal_the_first(ly, "log_softmax");
  const double e = std::exp(-1.0);
  for (int64_t r = 0; r < 4; ++r) {
    const float* row = y.data<float>() + r * 2;
    BOOST_TEST(std::abs(double(row[0]) + double(row[1]) - 1) <= 2.4e-7, "row " << r);  // two float32 roundings
    BOOST_TEST(std::abs(double(row[0]) - 1 / (1 + e)) <= 1.2e-7);
    BOOST_TEST(std::abs(double(ly.data<float>()[r * 2 + 1]) - (-1 - std::log1p(e))) <= 2.4e-7);
  }
}

BOOST_AUTO_TEST_CASE(cross_entropies_of_large_float32_logits_and_their_backprop_match_those_of_the_shifted_logits) {
  auto root = Scope::root();
  auto logits = ops::constant(root, shifted_rows({0, 1e4f, 1e5f}));
  auto sparse = ops::sparse_softmax_cross_entropy_with_logits(root, logits, ops::constant<int32_t>(root, {1, 1, 1}, {3}));
  auto dense = ops::softmax_cross_entropy_with_logits(
      root, logits, ops::constant<float>(root, {0.25f, 0.75f, 0.25f, 0.75f, 0.25f, 0.75f}, {3, 2}));
  auto sparse_grad = gradients(root, {ops::sum(root, sparse)}, {logits})[0];
  auto dense_grad = gradients(root, {ops::sum(root, dense)}, {logits})[0];
  Session session(root);
  auto out = session.run({sparse, Output(sparse.node(), 1), dense, Output(dense.node(), 1), sparse_grad, dense_grad});
  for (int k : {0, 2}) {
    const float* loss = out[k].data<float>();
    BOOST_TEST(loss[1] == loss[0], "loss " << k << " at 1e4: " << loss[1] << " vs " << loss[0]);
    BOOST_TEST(loss[2] == loss[0], "loss " << k << " at 1e5: " << loss[2] << " vs " << loss[0]);
  }
  const double log_z = std::log1p(std::exp(-1.0));  // -log softmax = log(1 + e^-1) + (0 or 1)
  BOOST_TEST(std::abs(out[0].data<float>()[0] - (1 + log_z)) <= 2.4e-7);
  BOOST_TEST(std::abs(out[2].data<float>()[0] - (0.75 + log_z)) <= 2.4e-7);
  expect_rows_equal_the_first(out[1], "sparse backprop");
  expect_rows_equal_the_first(out[3], "dense backprop");
  expect_rows_equal_the_first(out[4], "sparse gradient");
  expect_rows_equal_the_first(out[5], "dense gradient");
}
