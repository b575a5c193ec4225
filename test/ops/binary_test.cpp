// Binary elementwise ops and comparisons through a Session, against a naive reference in
// double with numpy broadcasting done by index arithmetic. Tolerances: elementwise_tolerance
// (float32 rel 1e-6, float64 rel 1e-14, float16 rel 1e-3, integers and bools exact).
#include <limits>

#include "op_test.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

enum class Domain { any, nonzero_divisor, power };

struct BinaryCase {
  const char* name;
  Output (*build)(const Scope&, Output, Output);
  double (*reference)(double, double, bool integers);
  Domain domain;
};

const BinaryCase kArithmetic[] = {
    {"add", ops::add, [](double a, double b, bool) { return a + b; }, Domain::any},
    {"sub", ops::sub, [](double a, double b, bool) { return a - b; }, Domain::any},
    {"mul", ops::mul, [](double a, double b, bool) { return a * b; }, Domain::any},
    {"div", ops::div, [](double a, double b, bool i) { return i ? std::trunc(a / b) : a / b; },
     Domain::nonzero_divisor},
    {"pow", ops::pow, [](double a, double b, bool) { return std::pow(a, b); }, Domain::power},
    {"maximum", ops::maximum, [](double a, double b, bool) { return std::max(a, b); }, Domain::any},
    {"minimum", ops::minimum, [](double a, double b, bool) { return std::min(a, b); }, Domain::any},
};

const BinaryCase kComparisons[] = {
    {"equal", ops::equal, [](double a, double b, bool) { return double(a == b); }, Domain::any},
    {"not_equal", ops::not_equal, [](double a, double b, bool) { return double(a != b); }, Domain::any},
    {"less", ops::less, [](double a, double b, bool) { return double(a < b); }, Domain::any},
    {"less_equal", ops::less_equal, [](double a, double b, bool) { return double(a <= b); }, Domain::any},
    {"greater", ops::greater, [](double a, double b, bool) { return double(a > b); }, Domain::any},
    {"greater_equal", ops::greater_equal, [](double a, double b, bool) { return double(a >= b); }, Domain::any},
};

// Operands for a domain: divisors stay away from zero, powers use a positive float base (or a
// small integer base with a non-negative exponent).
std::pair<Tensor, Tensor> operands(std::mt19937& rng, DType dtype, Domain domain, Shape sa, Shape sb) {
  const bool integers = !is_floating(dtype);
  switch (domain) {
    case Domain::any:
      return {random_tensor(rng, dtype, sa, -10, 10), random_tensor(rng, dtype, sb, -10, 10)};
    case Domain::nonzero_divisor: {
      Tensor b = random_tensor(rng, dtype, sb, integers ? 1 : 0.5, 9);
      Tensor sign = random_tensor(rng, DType::boolean, sb, 0, 1);
      visit_dtype(dtype, [&](auto zero) {
        using T = decltype(zero);
        if constexpr (!std::is_same_v<T, bool>)
          for (int64_t i = 0; i < b.num_elements(); ++i)
            if (sign.data<bool>()[i]) b.data<T>()[i] = T(-float(b.data<T>()[i]));
      });
      return {random_tensor(rng, dtype, sa, -50, 50), b};
    }
    case Domain::power:
      if (integers) return {random_tensor(rng, dtype, sa, -4, 4), random_tensor(rng, dtype, sb, 0, 5)};
      return {random_tensor(rng, dtype, sa, 0.5, 3), random_tensor(rng, dtype, sb, -2, 2)};
  }
  return {};
}

// Values in {-2, ..., 2} of any dtype (bools: both values).
Tensor small_integers(std::mt19937& rng, DType dtype, Shape shape) {
  Tensor t(dtype, shape);
  std::uniform_int_distribution<int> pick(-2, 2);
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      if constexpr (std::is_same_v<T, bool>) t.data<T>()[i] = pick(rng) > 0;
      else t.data<T>()[i] = T(float(pick(rng)));
    }
  });
  return t;
}

// Builds `c` on placeholders of shapes sa and sb, runs it, and compares with the reference.
void check_binary(const BinaryCase& c, DType dtype, Shape sa, Shape sb, bool comparison, uint32_t seed) {
  std::mt19937 rng(seed);
  auto [av, bv] = operands(rng, dtype, c.domain, sa, sb);
  if (comparison) {  // small integers, so that ties happen
    av = small_integers(rng, dtype, sa);
    bv = small_integers(rng, dtype, sb);
  }
  const Shape out_shape = broadcast_shapes(sa, sb);
  auto root = Scope::root();
  auto a = ops::placeholder(root.with_op_name("a"), dtype, sa);
  auto b = ops::placeholder(root.with_op_name("b"), dtype, sb);
  auto y = c.build(root.with_op_name(c.name), a, b);
  std::string what = std::string(c.name) + " " + name_of(dtype) + " " + sa.to_string() + " with " + sb.to_string();
  BOOST_TEST((y.shape() == PartialShape(out_shape)), what << ": inferred " << y.shape().to_string());
  Session session(root);
  auto out = session.run({{a, av}, {b, bv}}, {y});
  auto as = as_doubles(av), bs = as_doubles(bv);
  std::vector<double> expected;
  for (int64_t i = 0; i < out_shape.num_elements(); ++i)
    expected.push_back(c.reference(as[broadcast_index(out_shape, sa, i)],
                                   bs[broadcast_index(out_shape, sb, i)], !is_floating(dtype)));
  check_close(out[0], comparison ? DType::boolean : dtype, out_shape, expected,
              comparison ? Tolerance{0, 0} : elementwise_tolerance(dtype), what);
}

const Shape kSame{5, 6};

}  // namespace

BOOST_AUTO_TEST_CASE(arithmetic_on_float32_matches_the_reference) {
  for (auto& c : kArithmetic) check_binary(c, DType::float32, kSame, kSame, false, 10);
}

BOOST_AUTO_TEST_CASE(arithmetic_on_float64_matches_the_reference) {
  for (auto& c : kArithmetic) check_binary(c, DType::float64, kSame, kSame, false, 11);
}

BOOST_AUTO_TEST_CASE(arithmetic_on_int32_is_exact_and_divides_towards_zero) {
  for (auto& c : kArithmetic) check_binary(c, DType::int32, kSame, kSame, false, 12);
}

BOOST_AUTO_TEST_CASE(arithmetic_on_int64_is_exact) {
  for (auto& c : kArithmetic) check_binary(c, DType::int64, kSame, kSame, false, 13);
}

BOOST_AUTO_TEST_CASE(arithmetic_on_float16_matches_the_reference_to_half_precision) {
  for (auto& c : kArithmetic) check_binary(c, DType::float16, kSame, kSame, false, 14);
}

BOOST_AUTO_TEST_CASE(binary_ops_broadcast_like_numpy_in_either_operand_order) {
  const std::pair<Shape, Shape> pairs[] = {
      {Shape{}, Shape{3, 4}}, {Shape{3, 4}, Shape{}},      {Shape{3, 1}, Shape{1, 4}},
      {Shape{1, 4}, Shape{3, 1}}, {Shape{2, 3, 4}, Shape{4}}, {Shape{4}, Shape{2, 3, 4}},
      {Shape{2, 3, 4}, Shape{3, 1}}, {Shape{2, 1, 4}, Shape{3, 1}}, {Shape{1}, Shape{2, 3}}};
  uint32_t seed = 100;
  for (auto& [sa, sb] : pairs)
    for (DType dtype : {DType::float32, DType::float64, DType::int32})
      for (int k : {1, 3, 5})  // sub, div, maximum: the order of operands matters for the first two
        check_binary(kArithmetic[k], dtype, sa, sb, false, seed++);
}

BOOST_AUTO_TEST_CASE(comparisons_give_bool_and_match_the_reference_with_ties) {
  uint32_t seed = 200;
  for (auto& c : kComparisons)
    for (DType dtype : {DType::float32, DType::float64, DType::int32, DType::int64, DType::float16}) {
      check_binary(c, dtype, kSame, kSame, true, seed++);
      check_binary(c, dtype, Shape{3, 1}, Shape{1, 4}, true, seed++);
    }
}

BOOST_AUTO_TEST_CASE(equal_and_not_equal_compare_bools) {
  check_binary(kComparisons[0], DType::boolean, Shape{4, 4}, Shape{4}, true, 300);
  check_binary(kComparisons[1], DType::boolean, Shape{4, 4}, Shape{4, 4}, true, 301);
}

BOOST_AUTO_TEST_CASE(ordering_comparisons_and_arithmetic_refuse_bool_at_graph_build_time) {
  auto root = Scope::root();
  auto b = ops::placeholder(root, DType::boolean, {2});
  auto m = error_of([&] { ops::less(root.with_op_name("lt"), b, b); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "Less 'lt'"), m);
  BOOST_TEST(contains(m, "bool"), m);
  m = error_of([&] { ops::add(root.with_op_name("plus"), b, b); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "Add 'plus'"), m);
}

BOOST_AUTO_TEST_CASE(operands_of_different_dtypes_are_refused_at_graph_build_time_naming_both) {
  auto root = Scope::root();
  auto f = ops::placeholder(root, DType::float32, {2});
  auto i = ops::placeholder(root, DType::int32, {2});
  auto m = error_of([&] { ops::mul(root.with_op_name("mixed"), f, i); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "'mixed'"), m);
  BOOST_TEST(contains(m, "float32"), m);
  BOOST_TEST(contains(m, "int32"), m);
}

BOOST_AUTO_TEST_CASE(shapes_that_do_not_broadcast_are_refused_at_graph_build_time_naming_both) {
  auto root = Scope::root();
  auto a = ops::placeholder(root, DType::float32, {2, 3});
  auto b = ops::placeholder(root, DType::float32, {4});
  auto m = error_of([&] { ops::add(root.with_op_name("bad_add"), a, b); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "Add 'bad_add'"), m);
  BOOST_TEST(contains(m, "[2,3]"), m);
  BOOST_TEST(contains(m, "[4]"), m);
}

BOOST_AUTO_TEST_CASE(shapes_known_only_at_run_time_that_do_not_broadcast_fail_the_step) {
  auto root = Scope::root();
  auto a = ops::placeholder(root.with_op_name("a"), DType::float32);
  auto b = ops::placeholder(root.with_op_name("b"), DType::float32);
  auto y = ops::sub(root.with_op_name("late_sub"), a, b);
  Session session(root);
  auto m = error_of([&] {
    session.run({{a, Tensor::zeros(DType::float32, Shape{2, 3})}, {b, Tensor::zeros(DType::float32, Shape{4})}}, {y});
  }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "late_sub"), m);
  BOOST_TEST(contains(m, "[2,3]"), m);
  BOOST_TEST(contains(m, "[4]"), m);
}

BOOST_AUTO_TEST_CASE(integer_division_by_zero_fails_the_step_naming_the_node) {
  auto root = Scope::root();
  auto a = ops::constant<int32_t>(root, {10, 20, 30, 40}, Shape{4});
  auto b = ops::placeholder(root.with_op_name("divisor"), DType::int32, {4});
  auto y = ops::div(root.with_op_name("ratio"), a, b);
  Session session(root);
  auto m = error_of([&] { session.run({{b, Tensor::from_vector<int32_t>({1, 2, 0, 4})}}, {y}); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "ratio"), m);
  BOOST_TEST(contains(m, "division by zero"), m);
  // The session survives the failed step.
  auto out = session.run({{b, Tensor::from_vector<int32_t>({1, 2, 3, -4})}}, {y});
  BOOST_TEST((out[0].to_vector<int32_t>() == std::vector<int32_t>{10, 10, 10, -10}));
}

BOOST_AUTO_TEST_CASE(an_integer_raised_to_a_negative_power_fails_the_step_naming_the_node) {
  auto root = Scope::root();
  auto y = ops::pow(root.with_op_name("int_pow"), ops::constant<int32_t>(root, 2), ops::constant<int32_t>(root, -1));
  Session session(root);
  auto m = error_of([&] { session.run({y}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "int_pow"), m);
  BOOST_TEST(contains(m, "negative"), m);
}

BOOST_AUTO_TEST_CASE(float_division_by_zero_follows_ieee) {
  auto root = Scope::root();
  auto y = ops::div(root, ops::constant<double>(root, {1, -1, 0}, Shape{3}), ops::constant<double>(root, 0.0));
  Session session(root);
  const double inf = std::numeric_limits<double>::infinity();
  check_close(session.run({y})[0], DType::float64, Shape{3}, {inf, -inf, std::nan("")}, {0, 0}, "x/0");
}
