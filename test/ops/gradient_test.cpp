// The gradients of the math ops against central differences in float64 (the tolerance is in
// gradient_check.hpp), and the behaviour of gradients() itself.
#include <boost/test/unit_test.hpp>

#include "test/ops/gradient_check.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;

namespace {

using testing::check_gradient;

std::mt19937 rng(99);
Tensor r(Shape s, double lo = -2, double hi = 2) { return testing::random_tensor(rng, DType::float64, s, lo, hi); }

}  // namespace

BOOST_AUTO_TEST_CASE(gradients_of_binary_ops_with_broadcasting_match_central_differences) {
  using V = std::vector<Output>;
  check_gradient([](const Scope& s, const V& x) { return ops::add(s, x[0], x[1]); }, {r({2, 3}), r({3})}, "add");
  check_gradient([](const Scope& s, const V& x) { return ops::sub(s, x[0], x[1]); }, {r({2, 1}), r({1, 3})}, "sub");
  check_gradient([](const Scope& s, const V& x) { return ops::mul(s, x[0], x[1]); }, {r({2, 3}), r({})}, "mul");
  check_gradient([](const Scope& s, const V& x) { return ops::div(s, x[0], x[1]); }, {r({2, 3}), r({2, 3}, 0.5, 2)}, "div");
  check_gradient([](const Scope& s, const V& x) { return ops::pow(s, x[0], x[1]); }, {r({4}, 0.5, 2), r({4}, -1, 2)}, "pow");
  check_gradient([](const Scope& s, const V& x) { return ops::maximum(s, x[0], x[1]); }, {r({5}), r({5})}, "maximum");
  check_gradient([](const Scope& s, const V& x) { return ops::minimum(s, x[0], x[1]); }, {r({5}), r({5})}, "minimum");
}

BOOST_AUTO_TEST_CASE(gradients_of_unary_ops_match_central_differences) {
  using V = std::vector<Output>;
  check_gradient([](const Scope& s, const V& x) { return ops::neg(s, x[0]); }, {r({3})}, "neg");
  check_gradient([](const Scope& s, const V& x) { return ops::abs(s, x[0]); }, {r({4}, 0.1, 1)}, "abs of positives");
  check_gradient([](const Scope& s, const V& x) { return ops::abs(s, x[0]); }, {r({4}, -1, -0.1)}, "abs of negatives");
  check_gradient([](const Scope& s, const V& x) { return ops::exp(s, x[0]); }, {r({3})}, "exp");
  check_gradient([](const Scope& s, const V& x) { return ops::log(s, x[0]); }, {r({3}, 0.5, 3)}, "log");
  check_gradient([](const Scope& s, const V& x) { return ops::sqrt(s, x[0]); }, {r({3}, 0.5, 3)}, "sqrt");
  check_gradient([](const Scope& s, const V& x) { return ops::square(s, x[0]); }, {r({3})}, "square");
  check_gradient([](const Scope& s, const V& x) { return ops::reciprocal(s, x[0]); }, {r({3}, 0.5, 2)}, "reciprocal");
  check_gradient([](const Scope& s, const V& x) { return ops::identity(s, x[0]); }, {r({2, 2})}, "identity");
}

BOOST_AUTO_TEST_CASE(gradients_of_matmul_match_central_differences_for_every_transpose) {
  using V = std::vector<Output>;
  for (bool ta : {false, true})
    for (bool tb : {false, true}) {
      Shape a = ta ? Shape{3, 2} : Shape{2, 3};
      Shape b = tb ? Shape{4, 3} : Shape{3, 4};
      check_gradient(
          [=](const Scope& s, const V& x) {
            return ops::matmul(s, x[0], x[1], {.transpose_a = ta, .transpose_b = tb});
          },
          {r(a), r(b)}, std::string("matmul ta=") + (ta ? "1" : "0") + " tb=" + (tb ? "1" : "0"));
    }
}

BOOST_AUTO_TEST_CASE(gradients_of_reductions_match_central_differences) {
  using V = std::vector<Output>;
  using Axes = std::optional<std::vector<int64_t>>;
  for (Axes axes : {Axes{}, Axes{{0}}, Axes{{1}}, Axes{{-1, 0}}})
    for (bool keep : {false, true}) {
      // Weighting each output differently makes the check see where each gradient lands.
      auto weighted = [](const Scope& s, Output y) { return ops::mul(s, y, ops::add(s, y, y)); };
      check_gradient([=](const Scope& s, const V& x) { return weighted(s, ops::sum(s, x[0], axes, keep)); },
                     {r({2, 3})}, "sum");
      check_gradient([=](const Scope& s, const V& x) { return weighted(s, ops::mean(s, x[0], axes, keep)); },
                     {r({2, 3})}, "mean");
      check_gradient([=](const Scope& s, const V& x) { return weighted(s, ops::max(s, x[0], axes, keep)); },
                     {r({2, 3})}, "max");
    }
}

BOOST_AUTO_TEST_CASE(gradients_of_shape_ops_match_central_differences) {
  using V = std::vector<Output>;
  auto w = [](const Scope& s, Output y) { return ops::mul(s, y, y); };
  check_gradient([=](const Scope& s, const V& x) { return w(s, ops::reshape(s, x[0], {3, -1})); }, {r({2, 3})}, "reshape");
  check_gradient([=](const Scope& s, const V& x) { return w(s, ops::transpose(s, x[0], {2, 0, 1})); }, {r({2, 3, 2})}, "transpose");
  check_gradient([=](const Scope& s, const V& x) { return w(s, ops::transpose(s, x[0])); }, {r({2, 3})}, "transpose reversed");
  check_gradient([=](const Scope& s, const V& x) { return w(s, ops::fill(s, {2, 2}, x[0])); }, {r({})}, "fill");
}

BOOST_AUTO_TEST_CASE(the_gradient_of_a_small_regression_loss_matches_central_differences) {
  using V = std::vector<Output>;
  auto data = r({4, 3});
  auto target = r({4, 2});
  check_gradient(
      [&](const Scope& s, const V& x) {
        auto pred = ops::add(s, ops::matmul(s, ops::constant(s, data), x[0]), x[1]);
        return ops::mean(s, ops::square(s, ops::sub(s, pred, ops::constant(s, target))));
      },
      {r({3, 2}), r({2})}, "mean squared error of x w + b");
}

BOOST_AUTO_TEST_CASE(partial_gradients_along_several_paths_are_summed) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float64, Shape{});
  auto y = ops::add(root, ops::mul(root, x, x), ops::mul(root, x, ops::constant(root, 3.0)));  // x^2 + 3x
  auto g = gradients(root, {y}, {x});
  Session s(root);
  BOOST_TEST(s.run({{x, Tensor::scalar(2.0)}}, {g[0]})[0].scalar_value<double>() == 7.0);
}

BOOST_AUTO_TEST_CASE(a_comparison_passes_no_gradient_and_an_unrelated_x_gets_none) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float64, Shape{3});
  auto other = ops::placeholder(root, DType::float64, Shape{3});
  auto mask = ops::cast(root, ops::greater(root, x, ops::constant(root, 0.0)), DType::float64);
  auto y = ops::sum(root, ops::mul(root, mask, x));  // relu, built by hand
  auto g = gradients(root, {y}, {x, other});
  BOOST_TEST(!g[1]);
  Session s(root);
  auto out = s.run({{x, Tensor::from_vector<double>({-1, 2, 3})}}, {g[0]});
  BOOST_TEST(out[0].to_vector<double>() == std::vector<double>({0, 1, 1}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(grad_ys_scale_the_result) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float64, Shape{2});
  auto y = ops::square(root, x);
  auto g = gradients(root, {y}, {x}, {ops::constant<double>(root, {10, 100}, {2})});
  Session s(root);
  auto out = s.run({{x, Tensor::from_vector<double>({1, 2})}}, {g[0]});
  BOOST_TEST(out[0].to_vector<double>() == std::vector<double>({20, 400}), boost::test_tools::per_element());
}

// Every differentiable op of the library has a gradient; an op of the user's may have none.
TROUPE_REGISTER_OP(OpDef{.name = "TestWithoutGradient", .num_inputs = 1, .shape_fn = shape_fns::unchanged});

BOOST_AUTO_TEST_CASE(a_path_through_an_op_without_a_gradient_is_refused_naming_it) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float64, Shape{2});
  auto y = ops::reshape_like(root.with_op_name("odd"), x, x);
  Output z(&root.with_op_name("no_grad_here").add("TestWithoutGradient", {y}));
  try {
    gradients(root, {ops::sum(root, z)}, {x});
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    BOOST_TEST(contains(e.what(), "no_grad_here"), e.what());
    BOOST_TEST(contains(e.what(), "TestWithoutGradient"), e.what());
  }
}

BOOST_AUTO_TEST_CASE(gradients_of_floor_mod_and_truncate_mod_match_central_differences) {
  using V = std::vector<Output>;
  // a / b stays at least 0.05 away from an integer, where the remainders jump.
  const Tensor a = Tensor::from_vector<double>({-3.7, -1.2, 0.3, 2.9, 5.55, -5.55}, {2, 3});
  const Tensor b = Tensor::from_vector<double>({1.5, -0.7, 2.0, -1.1, 2.5, 2.5}, {2, 3});
  check_gradient([](const Scope& s, const V& x) { return ops::floor_mod(s, x[0], x[1]); }, {a, b}, "floor_mod");
  check_gradient([](const Scope& s, const V& x) { return ops::truncate_mod(s, x[0], x[1]); }, {a, b}, "truncate_mod");
  check_gradient([](const Scope& s, const V& x) { return ops::floor_mod(s, x[0], x[1]); },
                 {a, Tensor::from_vector<double>({1.5, -0.7, 2.0})}, "floor_mod with a broadcast divisor");
}

BOOST_AUTO_TEST_CASE(floor_div_and_truncate_div_pass_no_gradient) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float64, Shape{3});
  auto g = gradients(root, {ops::sum(root, ops::add(root, ops::floor_div(root, x, x), ops::truncate_div(root, x, x)))}, {x});
  BOOST_TEST(!g[0]);
}
