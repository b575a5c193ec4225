// Unary elementwise ops through a Session, against std:: math in double on random inputs.
// Tolerances: elementwise_tolerance (float32 rel 1e-6, float64 rel 1e-14, float16 rel 1e-3,
// integers exact).
#include <limits>

#include "op_test.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

struct UnaryCase {
  const char* name;
  Output (*build)(const Scope&, Output);
  double (*reference)(double);
  bool positive_only;  // log, sqrt, reciprocal: inputs drawn from [0.1, 5]
  bool integers;       // defined for integer dtypes too
};

const UnaryCase kUnary[] = {
    {"neg", ops::neg, [](double x) { return -x; }, false, true},
    {"abs", ops::abs, [](double x) { return std::fabs(x); }, false, true},
    {"exp", ops::exp, [](double x) { return std::exp(x); }, false, false},
    {"log", ops::log, [](double x) { return std::log(x); }, true, false},
    {"sqrt", ops::sqrt, [](double x) { return std::sqrt(x); }, true, false},
    {"square", ops::square, [](double x) { return x * x; }, false, true},
    {"reciprocal", ops::reciprocal, [](double x) { return 1.0 / x; }, true, false},
};

// Runs every unary op defined for `dtype` on random inputs of `shape` in one step.
void check_unary_ops(DType dtype, uint32_t seed, Shape shape = Shape{4, 7}) {
  std::mt19937 rng(seed);
  const bool floating = is_floating(dtype);
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), dtype, shape);
  auto p = ops::placeholder(root.with_op_name("p"), dtype, shape);
  Tensor xv = floating ? random_tensor(rng, dtype, shape, -3, 3) : random_tensor(rng, dtype, shape, -100, 100);
  Tensor pv = random_tensor(rng, dtype, shape, 0.1, 5);
  std::vector<const UnaryCase*> cases;
  std::vector<TensorName> fetches;
  for (auto& c : kUnary) {
    if (!floating && !c.integers) continue;
    cases.push_back(&c);
    fetches.push_back(c.build(root.with_op_name(c.name), c.positive_only ? p : x));
  }
  Session session(root);
  auto out = session.run({{x, xv}, {p, pv}}, fetches);
  BOOST_TEST_REQUIRE(out.size() == cases.size());
  auto xs = as_doubles(xv), ps = as_doubles(pv);
  for (std::size_t k = 0; k < cases.size(); ++k) {
    const auto& in = cases[k]->positive_only ? ps : xs;
    std::vector<double> expected;
    for (double v : in) expected.push_back(cases[k]->reference(v));
    check_close(out[k], dtype, shape, expected, elementwise_tolerance(dtype),
                std::string(cases[k]->name) + " " + name_of(dtype));
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(unary_ops_on_float32_match_std_math) { check_unary_ops(DType::float32, 1); }
// 64 elements or more take the vectorized loops (ops/math/float_loops.hpp); 1,023 leaves a
// remainder after the vector width.
BOOST_AUTO_TEST_CASE(unary_ops_on_large_float32_tensors_match_std_math) {
  check_unary_ops(DType::float32, 6, Shape{64});
  check_unary_ops(DType::float32, 7, Shape{33, 31});
}
BOOST_AUTO_TEST_CASE(unary_ops_on_float64_match_std_math) { check_unary_ops(DType::float64, 2); }
BOOST_AUTO_TEST_CASE(unary_ops_on_float16_match_std_math_to_half_precision) {
  check_unary_ops(DType::float16, 3);
}
BOOST_AUTO_TEST_CASE(neg_abs_and_square_on_int32_are_exact) { check_unary_ops(DType::int32, 4); }
BOOST_AUTO_TEST_CASE(neg_abs_and_square_on_int64_are_exact) { check_unary_ops(DType::int64, 5); }

BOOST_AUTO_TEST_CASE(unary_ops_follow_ieee_at_the_edges_of_their_domain) {
  auto root = Scope::root();
  auto x = ops::constant<float>(root, {0.0f, -1.0f, 4.0f}, Shape{3});
  Session session(root);
  auto out = session.run({ops::log(root, x), ops::sqrt(root, x), ops::reciprocal(root, x)});
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  check_close(out[0], DType::float32, Shape{3}, {-inf, nan, std::log(4.0)}, {0, 1e-6}, "log");
  check_close(out[1], DType::float32, Shape{3}, {0, nan, 2}, {0, 0}, "sqrt");
  check_close(out[2], DType::float32, Shape{3}, {inf, -1, 0.25}, {0, 0}, "reciprocal");
}

BOOST_AUTO_TEST_CASE(a_unary_op_on_an_empty_tensor_gives_an_empty_tensor) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, {-1, 3});
  auto y = ops::exp(root, x);
  Session session(root);
  auto out = session.run({{x, Tensor(DType::float32, Shape{0, 3})}}, {y});
  check_close(out[0], DType::float32, Shape{0, 3}, {}, {0, 0}, "exp of nothing");
}

BOOST_AUTO_TEST_CASE(float_only_unary_ops_refuse_integers_at_graph_build_time) {
  auto root = Scope::root();
  auto i = ops::placeholder(root, DType::int32, {2});
  int k = 0;
  for (auto build : {ops::exp, ops::log, ops::sqrt, ops::reciprocal}) {
    std::string name = "f" + std::to_string(k++);
    auto m = error_of([&] { build(root.with_op_name(name), i); }, ErrorCode::invalid_argument);
    BOOST_TEST(contains(m, "int32"), m);
    BOOST_TEST(contains(m, "'" + name + "'"), m);
  }
}

BOOST_AUTO_TEST_CASE(unary_ops_refuse_bool_at_graph_build_time) {
  auto root = Scope::root();
  auto b = ops::placeholder(root, DType::boolean, {2});
  auto m = error_of([&] { ops::neg(root.with_op_name("negate_flags"), b); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "Neg 'negate_flags'"), m);
  BOOST_TEST(contains(m, "bool"), m);
}

BOOST_AUTO_TEST_CASE(neg_abs_and_square_of_the_smallest_integer_wrap_around_like_tensorflow) {
  auto root = Scope::root();
  const int32_t min32 = std::numeric_limits<int32_t>::lowest();
  const int64_t min64 = std::numeric_limits<int64_t>::lowest();
  auto x32 = ops::constant<int32_t>(root, {min32, -5, 65536}, Shape{3});
  auto x64 = ops::constant<int64_t>(root, {min64, -5, int64_t(1) << 32}, Shape{3});
  Session session(root);
  auto out = session.run({ops::neg(root, x32), ops::abs(root, x32), ops::square(root, x32),
                          ops::neg(root, x64), ops::abs(root, x64), ops::square(root, x64)});
  BOOST_TEST((out[0].to_vector<int32_t>() == std::vector<int32_t>{min32, 5, -65536}));
  BOOST_TEST((out[1].to_vector<int32_t>() == std::vector<int32_t>{min32, 5, 65536}));
  BOOST_TEST((out[2].to_vector<int32_t>() == std::vector<int32_t>{0, 25, 0}));
  BOOST_TEST((out[3].to_vector<int64_t>() == std::vector<int64_t>{min64, 5, -(int64_t(1) << 32)}));
  BOOST_TEST((out[4].to_vector<int64_t>() == std::vector<int64_t>{min64, 5, int64_t(1) << 32}));
  BOOST_TEST((out[5].to_vector<int64_t>() == std::vector<int64_t>{0, 25, 0}));
}
