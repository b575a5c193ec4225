// Second derivatives: gradients() applied to a graph that already holds a gradient. Each case
// builds the first derivative d loss / d x symbolically and lets check_gradient_of compare the
// derivative of sum(v * d loss / d x) (a Hessian-vector product, v fixed and random) with
// central differences of the first derivative. float64 within 1e-6 (gradient_check.hpp); the
// oneDNN ops in float32 within check_gradient_f32's tolerance.
#include <boost/test/unit_test.hpp>

#include <algorithm>

#include "test/ops/gradient_check.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

using V = std::vector<Output>;

std::mt19937 rng(2024);
Tensor r(Shape s, double lo = -2, double hi = 2) { return testing::random_tensor(rng, DType::float64, s, lo, hi); }

// d loss / d xs[wrt] for the scalar loss built by `loss`.
using Loss = std::function<Output(const Scope&, const V&)>;
testing::Builder first_derivative(Loss loss, int wrt = 0) {
  return [loss, wrt](const Scope& s, const V& x) {
    auto g = gradients(s, {loss(s, x)}, {x[std::size_t(wrt)]})[0];
    BOOST_REQUIRE(g);
    return g;
  };
}

// Checks the Hessian-vector products of the loss: those of its first derivative w.r.t. each
// input in `wrt`, differentiated w.r.t. every input (so each first derivative in `wrt` must
// depend on every input: one that does not has no gradient to compare).
void check_second_order(const Loss& loss, std::vector<Tensor> values, const std::string& what,
                        std::vector<int> wrt = {0}) {
  for (int i : wrt)
    testing::check_gradient_of<double>(first_derivative(loss, i), values,
                                       what + ", d/dx" + std::to_string(i), true, {1e-6, 1e-6, 1e-6});
}

void check_second_order_f32(const Loss& loss, std::vector<Tensor> values, const std::string& what,
                            std::vector<int> wrt = {0}) {
  for (int i : wrt)
    testing::check_gradient_of<float>(first_derivative(loss, i), values,
                                      what + ", d/dx" + std::to_string(i), true, {1e-2, 2e-3, 2e-2});
}

// sum(w * y) with w fixed and random: a loss whose Hessian has no accidental symmetry.
Output weighted_sum(const Scope& s, Output y) {
  auto w = ops::constant(s, testing::random_tensor(rng, y.dtype(), y.shape().to_shape(), -1, 1));
  return ops::sum(s, ops::mul(s, y, w));
}

}  // namespace

BOOST_AUTO_TEST_CASE(second_derivatives_of_activations_match_central_differences_of_the_first) {
  using Act = Output (*)(const Scope&, Output);
  const std::pair<Act, const char*> activations[] = {
      {ops::tanh, "tanh"}, {ops::sigmoid, "sigmoid"}, {ops::relu, "relu"}, {ops::elu, "elu"}};
  for (auto [act, name] : activations) {
    // act(x) alone exercises XGrad's gradient w.r.t. y; its square also w.r.t. the incoming g.
    check_second_order([act](const Scope& s, const V& x) { return weighted_sum(s, act(s, x[0])); }, {r({2, 3})},
                       name);
    check_second_order([act](const Scope& s, const V& x) { return weighted_sum(s, ops::square(s, act(s, x[0]))); },
                       {r({2, 3})}, std::string("square of ") + name);
  }
}

BOOST_AUTO_TEST_CASE(second_derivatives_of_elementwise_math_match_central_differences_of_the_first) {
  check_second_order([](const Scope& s, const V& x) { return weighted_sum(s, ops::mul(s, ops::square(s, x[0]), x[1])); },
                     {r({2, 3}), r({2, 3})}, "square times y");
  check_second_order([](const Scope& s, const V& x) { return weighted_sum(s, ops::mul(s, ops::exp(s, x[0]), ops::log(s, x[1]))); },
                     {r({4}), r({4}, 0.5, 3)}, "exp(x) log(y)", {0, 1});
  check_second_order([](const Scope& s, const V& x) { return weighted_sum(s, ops::div(s, ops::sqrt(s, x[0]), x[1])); },
                     {r({3}, 0.5, 3), r({3}, 0.5, 2)}, "sqrt(x) / y", {0, 1});
  // Broadcast operands: the first derivative sums back to [3] through SumToShapeOf.
  check_second_order([](const Scope& s, const V& x) { return weighted_sum(s, ops::square(s, ops::sub(s, x[0], x[1]))); },
                     {r({2, 3}), r({3})}, "square of a broadcast difference", {0, 1});
  check_second_order([](const Scope& s, const V& x) { return weighted_sum(s, ops::mul(s, ops::mul(s, x[0], x[1]), x[1])); },
                     {r({2, 1}), r({1, 3})}, "x y^2 broadcast both ways", {1});
}

BOOST_AUTO_TEST_CASE(second_derivatives_through_reductions_match_central_differences_of_the_first) {
  using Axes = std::vector<int64_t>;
  check_second_order([](const Scope& s, const V& x) { return ops::sum(s, ops::square(s, ops::sum(s, x[0], Axes{1}))); },
                     {r({2, 3})}, "square of a row sum");
  check_second_order(
      [](const Scope& s, const V& x) { return weighted_sum(s, ops::mul(s, ops::sum(s, x[0], Axes{1}, true), x[0])); },
      {r({2, 3})}, "row sum kept as [2,1] times x");
  check_second_order([](const Scope& s, const V& x) { return weighted_sum(s, ops::square(s, ops::mean(s, x[0], Axes{0}))); },
                     {r({3, 4})}, "square of a column mean");
  check_second_order([](const Scope& s, const V& x) { return ops::square(s, ops::mean(s, ops::tanh(s, x[0]))); },
                     {r({2, 2})}, "square of the mean of everything");
  check_second_order([](const Scope& s, const V& x) { return weighted_sum(s, ops::square(s, ops::max(s, x[0], Axes{1}))); },
                     {r({3, 4})}, "square of a row maximum");
}

BOOST_AUTO_TEST_CASE(second_derivatives_of_matmul_and_bias_add_match_central_differences_of_the_first) {
  check_second_order([](const Scope& s, const V& x) { return weighted_sum(s, ops::square(s, ops::matmul(s, x[0], x[1]))); },
                     {r({2, 3}), r({3, 4})}, "square of a product", {0, 1});
  check_second_order(
      [](const Scope& s, const V& x) {
        return weighted_sum(s, ops::square(s, ops::matmul(s, x[0], x[1], {.transpose_a = true, .transpose_b = true})));
      },
      {r({3, 2}), r({4, 3})}, "square of a product of transposes", {0, 1});
  for (const char* format : {"NCHW", "NHWC"})
    check_second_order(
        [format](const Scope& s, const V& x) { return weighted_sum(s, ops::tanh(s, ops::bias_add(s, x[0], x[1], format))); },
        {r({2, 3, 2, 2}), r({format == std::string("NCHW") ? 3 : 2})}, std::string("tanh of bias_add ") + format, {0, 1});
}

BOOST_AUTO_TEST_CASE(second_derivatives_of_softmax_and_cross_entropies_match_central_differences_of_the_first) {
  check_second_order([](const Scope& s, const V& x) { return weighted_sum(s, ops::softmax(s, x[0])); }, {r({2, 4})},
                     "softmax");
  check_second_order([](const Scope& s, const V& x) { return weighted_sum(s, ops::log_softmax(s, x[0])); },
                     {r({2, 4})}, "log_softmax");
  check_second_order(
      [](const Scope& s, const V& x) {
        return weighted_sum(s, ops::sparse_softmax_cross_entropy_with_logits(s, x[0], ops::constant<int32_t>(s, {2, 0, 3}, {3})));
      },
      {r({3, 4})}, "sparse cross-entropy");
  check_second_order(
      [](const Scope& s, const V& x) { return weighted_sum(s, ops::softmax_cross_entropy_with_logits(s, x[0], x[1])); },
      {r({3, 4}), r({3, 4}, 0.1, 1)}, "dense cross-entropy, labels that do not sum to one");
}

BOOST_AUTO_TEST_CASE(the_hessian_vector_product_of_a_small_mlp_matches_central_differences_of_its_gradient) {
  const Tensor images = r({5, 3});
  auto loss = [images](const Scope& s, const V& p) {
    auto hidden = ops::tanh(s, ops::bias_add(s, ops::matmul(s, ops::constant(s, images), p[0]), p[1]));
    auto logits = ops::add(s, ops::matmul(s, hidden, p[2]), p[3]);
    return ops::mean(s, ops::sparse_softmax_cross_entropy_with_logits(
                            s, logits, ops::constant<int64_t>(s, {0, 1, 2, 1, 0}, {5})));
  };
  // The whole gradient as one vector, so that one check covers every block of the Hessian.
  auto flat_gradient = [loss](const Scope& s, const V& p) {
    auto grads = gradients(s, {loss(s, p)}, p);
    V flat;
    for (auto& g : grads) flat.push_back(ops::reshape(s, g, {-1}));
    return ops::concat(s, flat, 0);
  };
  testing::check_gradient_of<double>(flat_gradient, {r({3, 4}, -1, 1), r({4}, -1, 1), r({4, 3}, -1, 1), r({3}, -1, 1)},
                                     "mlp", true, {1e-6, 1e-6, 1e-6});
}

BOOST_AUTO_TEST_CASE(second_derivatives_of_conv2d_and_avg_pool_match_central_differences_of_the_first) {
  using testing::rand_f32;
  check_second_order_f32(
      [](const Scope& s, const V& x) { return weighted_sum(s, ops::square(s, ops::conv2d(s, x[0], x[1]))); },
      {rand_f32({1, 2, 4, 4}), rand_f32({3, 2, 3, 3})}, "square of a SAME conv2d", {0, 1});
  check_second_order_f32(
      [](const Scope& s, const V& x) {
        return weighted_sum(s, ops::square(s, ops::conv2d(s, x[0], x[1], {.strides = {2, 2}, .padding = "VALID"})));
      },
      {rand_f32({2, 1, 5, 5}), rand_f32({2, 1, 3, 3})}, "square of a strided VALID conv2d", {0, 1});
  check_second_order_f32(
      [](const Scope& s, const V& x) {
        return weighted_sum(s, ops::square(s, ops::avg_pool(s, x[0], {.ksize = {3, 3}, .strides = {2, 2}, .padding = "SAME"})));
      },
      {rand_f32({1, 2, 5, 5})}, "square of a SAME avg_pool");
}

BOOST_AUTO_TEST_CASE(second_derivatives_through_both_branches_of_a_cond_match_central_differences_of_the_first) {
  for (bool take_then : {true, false})
    check_second_order(
        [take_then](const Scope& s, const V& x) {
          auto y = ops::cond(
              s, ops::constant(s, take_then), {x[0], x[1]},
              [](const Scope& b, const V& in) { return V{ops::mul(b, ops::tanh(b, in[0]), in[1])}; },
              [](const Scope& b, const V& in) { return V{ops::mul(b, ops::exp(b, in[0]), ops::square(b, in[1]))}; })[0];
          return weighted_sum(s, y);
        },
        {r({2, 3}), r({2, 3})}, take_then ? "then: tanh(x) y" : "else: exp(x) y^2", {0, 1});
}

namespace {

// float32 values k / 10 (k = -n/2 ... n/2 - 1) in random order: every two differ by at least
// 0.1, so central differences with a step of 0.01 never move a pooling window's maximum.
Tensor distinct_f32(Shape shape) {
  std::vector<float> v(std::size_t(shape.num_elements()));
  for (std::size_t k = 0; k < v.size(); ++k) v[k] = (float(k) - float(v.size() / 2)) / 10;
  std::shuffle(v.begin(), v.end(), rng);
  return Tensor::from_vector<float>(v, shape);
}

}  // namespace

BOOST_AUTO_TEST_CASE(second_derivatives_of_max_pool_match_central_differences_of_the_first) {
  check_second_order_f32([](const Scope& s, const V& x) { return weighted_sum(s, ops::square(s, ops::max_pool(s, x[0]))); },
                         {distinct_f32({1, 2, 4, 4})}, "square of a 2x2 VALID max_pool");
  const ops::PoolOptions same{.ksize = {3, 3}, .strides = {2, 2}, .padding = "SAME"};
  check_second_order_f32(
      [same](const Scope& s, const V& x) { return weighted_sum(s, ops::square(s, ops::max_pool(s, x[0], same))); },
      {distinct_f32({1, 1, 5, 5})}, "square of an overlapping SAME max_pool");
  // MaxPoolGradGrad gathers where MaxPoolGrad scatters: its gradient w.r.t. its second input.
  const Tensor input = distinct_f32({1, 1, 5, 5});
  testing::check_gradient_f32(
      [input, same](const Scope& s, const V& x) {
        return Output(&s.add("MaxPoolGradGrad", {ops::constant(s, input), x[0]},
                             {{"ksize", same.ksize}, {"strides", same.strides}, {"padding", same.padding}}));
      },
      {testing::rand_f32({1, 1, 5, 5})}, "MaxPoolGradGrad");
}

BOOST_AUTO_TEST_CASE(second_derivatives_of_lrn_match_central_differences_of_the_first) {
  using testing::rand_f32;
  for (auto options : {ops::LrnOptions{.depth_radius = 1, .bias = 1, .alpha = 0.5, .beta = 0.75},
                       ops::LrnOptions{.depth_radius = 5, .bias = 2, .alpha = 1, .beta = 0.5}})
    check_second_order_f32(
        [options](const Scope& s, const V& x) { return weighted_sum(s, ops::square(s, ops::lrn(s, x[0], options))); },
        {rand_f32({2, 4, 2, 2})}, "square of lrn, depth_radius " + std::to_string(options.depth_radius));
}

BOOST_AUTO_TEST_CASE(second_derivatives_through_concat_and_split_match_central_differences_of_the_first) {
  check_second_order(
      [](const Scope& s, const V& x) {
        auto both = ops::concat(s, {ops::square(s, x[0]), ops::mul(s, x[0], x[1])}, 1);
        auto halves = ops::split(s, ops::tanh(s, both), 1, 2);
        return weighted_sum(s, ops::mul(s, halves[0], halves[1]));
      },
      {r({2, 2}), r({2, 2})}, "split of tanh of a concat", {0, 1});
}

namespace {

// An op whose gradient is another op without a gradient of its own, as a user's op may be
// (graph building needs neither a kernel).
TROUPE_REGISTER_OP(OpDef{.name = "TestTwice", .num_inputs = 1, .shape_fn = shape_fns::unchanged});
TROUPE_REGISTER_OP(OpDef{.name = "TestTwiceGrad", .num_inputs = 1, .shape_fn = shape_fns::unchanged});
TROUPE_REGISTER_GRADIENT("TestTwice", [](const Scope& s, const Node&, const std::vector<Output>& g) {
  return std::vector<Output>{Output(&s.with_op_name("twice_grad").add("TestTwiceGrad", {g[0]}))};
});

}  // namespace

BOOST_AUTO_TEST_CASE(a_second_derivative_through_an_op_without_a_gradient_is_refused_naming_the_op_and_node) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float64, {3});
  auto y = Output(&root.add("TestTwice", {x}));
  auto g = gradients(root, {ops::sum(root, ops::square(root, y))}, {x})[0];
  auto m = error_of([&] { gradients(root, {ops::sum(root, g)}, {x}); }, ErrorCode::unimplemented);
  BOOST_TEST(contains(m, "op 'TestTwiceGrad'"), m);
  BOOST_TEST(contains(m, "gradients/twice_grad"), m);
}

BOOST_AUTO_TEST_CASE(a_second_derivative_through_the_gradient_of_a_while_loop_is_refused_naming_the_saved_value) {
  // y = y0 * x^3 by a loop of products: the first derivative reads each iteration's product
  // from a stack, which no data edge ties to x, so differentiating it again is refused
  // rather than answered without that dependence.
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, Shape{});
  auto y0 = ops::placeholder(root, DType::float32, Shape{});
  auto out = ops::while_loop(
      root, [](const Scope& s, const V& v) { return ops::less(s, v[0], ops::constant<int32_t>(s, 3)); },
      [&](const Scope& s, const V& v) {
        return V{ops::add(s, v[0], ops::constant<int32_t>(s, 1)), ops::mul(s, v[1], x)};
      },
      {ops::constant<int32_t>(root, 0), y0});
  auto g = gradients(root, {out[1]}, {x})[0];
  auto m = error_of([&] { gradients(root, {g}, {x}); }, ErrorCode::unimplemented);
  BOOST_TEST(contains(m, "while loop"), m);
  BOOST_TEST(contains(m, "StackPop"), m);
}

BOOST_AUTO_TEST_CASE(second_derivatives_of_batch_norm_match_central_differences_of_the_first) {
  using testing::rand_f32;
  for (bool training : {true, false}) {
    const ops::BatchNormOptions options{.epsilon = 1e-3, .is_training = training};
    const std::string mode = training ? "training" : "inference";
    // Inputs x, scale and offset; the given mean and variance are constants (batch_norm's
    // gradient, as TensorFlow's, passes them none, and training does not read them).
    auto bn = [options](const Scope& s, const V& x, Shape channels) {
      auto mean = ops::constant(s, rand_f32(channels, -0.2f, 0.2f));
      auto variance = ops::constant(s, rand_f32(channels, 0.5f, 1.5f));
      return ops::batch_norm(s, x[0], x[1], x[2], mean, variance, options).y;
    };
    std::vector<Tensor> nchw = {rand_f32({3, 2, 2, 2}), rand_f32({2}, 0.5, 1.5), rand_f32({2})};
    std::vector<Tensor> flat = {rand_f32({4, 3}), rand_f32({3}, 0.5, 1.5), rand_f32({3})};
    check_second_order_f32(
        [bn](const Scope& s, const V& x) { return weighted_sum(s, ops::square(s, bn(s, x, Shape{2}))); }, nchw,
        "square of batch_norm, NCHW, " + mode, {0, 1});
    check_second_order_f32(
        [bn](const Scope& s, const V& x) { return weighted_sum(s, ops::tanh(s, bn(s, x, Shape{3}))); }, flat,
        "tanh of batch_norm, [N, C], " + mode, {0, 1, 2});
  }
}
