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
    {"truncate_div", ops::truncate_div, [](double a, double b, bool) { return std::trunc(a / b); },
     Domain::nonzero_divisor},
    {"floor_div", ops::floor_div, [](double a, double b, bool) { return std::floor(a / b); },
     Domain::nonzero_divisor},
    {"truncate_mod", ops::truncate_mod, [](double a, double b, bool) { return std::fmod(a, b); },
     Domain::nonzero_divisor},
    {"floor_mod", ops::floor_mod,
     [](double a, double b, bool) {
       double r = std::fmod(a, b);
       return r != 0 && (r < 0) != (b < 0) ? r + b : r;
     },
     Domain::nonzero_divisor},
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

// Float32 operands of 64 elements or more take the kernels' vectorized loops
// (ops/math/float_loops.hpp): equal shapes and a single element on either side, of lengths
// that leave a remainder after the vector width.
BOOST_AUTO_TEST_CASE(arithmetic_on_large_float32_operands_and_a_broadcast_scalar_matches_the_reference) {
  uint32_t seed = 20;
  for (auto& c : kArithmetic)
    for (const Shape& shape : {Shape{64}, Shape{33, 31}}) {
      check_binary(c, DType::float32, shape, shape, false, seed++);
      check_binary(c, DType::float32, Shape{}, shape, false, seed++);
      check_binary(c, DType::float32, shape, Shape{1}, false, seed++);
    }
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

namespace {

// Runs op(a, b) on int32 or int64 vectors through a session.
template <class T>
std::vector<T> run_integer_op(Output (*op)(const Scope&, Output, Output), std::vector<T> a, std::vector<T> b) {
  auto root = Scope::root();
  auto y = op(root, ops::constant<T>(root, a, Shape{int64_t(a.size())}),
              ops::constant<T>(root, b, Shape{int64_t(b.size())}));
  Session session(root);
  return session.run({y})[0].template to_vector<T>();
}

template <class T>
void check_division_family_on_negative_operands() {
  BOOST_TEST_CONTEXT(name_of(dtype_v<T>)) {
    const std::vector<T> a{7, -7, 7, -7, 6, -6};
    const std::vector<T> b{2, 2, -2, -2, -3, 3};
    BOOST_TEST((run_integer_op<T>(ops::div, a, b) == std::vector<T>{3, -3, -3, 3, -2, -2}));
    BOOST_TEST((run_integer_op<T>(ops::truncate_div, a, b) == std::vector<T>{3, -3, -3, 3, -2, -2}));
    BOOST_TEST((run_integer_op<T>(ops::floor_div, a, b) == std::vector<T>{3, -4, -4, 3, -2, -2}));
    BOOST_TEST((run_integer_op<T>(ops::truncate_mod, a, b) == std::vector<T>{1, -1, 1, -1, 0, 0}));
    BOOST_TEST((run_integer_op<T>(ops::floor_mod, a, b) == std::vector<T>{1, 1, -1, -1, 0, 0}));
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(div_truncates_and_floor_div_floors_integer_quotients_of_either_sign) {
  check_division_family_on_negative_operands<int32_t>();
  check_division_family_on_negative_operands<int64_t>();
}

BOOST_AUTO_TEST_CASE(uint8_division_and_modulo_are_exact) {
  const std::vector<uint8_t> a{255, 7, 0}, b{2, 255, 9};
  BOOST_TEST((run_integer_op<uint8_t>(ops::div, a, b) == std::vector<uint8_t>{127, 0, 0}));
  BOOST_TEST((run_integer_op<uint8_t>(ops::floor_div, a, b) == std::vector<uint8_t>{127, 0, 0}));
  BOOST_TEST((run_integer_op<uint8_t>(ops::floor_mod, a, b) == std::vector<uint8_t>{1, 7, 0}));
}

BOOST_AUTO_TEST_CASE(float_floor_and_truncating_division_round_the_quotient_and_keep_the_remainder_sign) {
  auto root = Scope::root();
  auto a = ops::constant<double>(root, {7.5, -7.5, 7.5, -7.5}, Shape{4});
  auto b = ops::constant<double>(root, {2, 2, -2, -2}, Shape{4});
  Session session(root);
  auto out = session.run({ops::truncate_div(root, a, b), ops::floor_div(root, a, b),
                          ops::truncate_mod(root, a, b), ops::floor_mod(root, a, b)});
  const Tolerance exact{0, 0};
  check_close(out[0], DType::float64, Shape{4}, {3, -3, -3, 3}, exact, "truncate_div");
  check_close(out[1], DType::float64, Shape{4}, {3, -4, -4, 3}, exact, "floor_div");
  check_close(out[2], DType::float64, Shape{4}, {1.5, -1.5, 1.5, -1.5}, exact, "truncate_mod");
  check_close(out[3], DType::float64, Shape{4}, {1.5, 0.5, -0.5, -1.5}, exact, "floor_mod");
}

namespace {

// The smallest value divided by -1 does not fit the dtype: every quotient op refuses it
// (the processor would trap), and the session runs on.
template <class T>
void check_smallest_value_divided_by_minus_one_fails_naming_the_node(Output (*op)(const Scope&, Output, Output),
                                                                     const char* name) {
  BOOST_TEST_CONTEXT(name << " " << name_of(dtype_v<T>)) {
    const T lowest = std::numeric_limits<T>::lowest();
    auto root = Scope::root();
    auto a = ops::placeholder(root.with_op_name("dividend"), dtype_v<T>, {2});
    auto y = op(root.with_op_name("quotient"), a, ops::constant<T>(root, {-1, 2}, Shape{2}));
    Session session(root);
    auto m = error_of([&] { session.run({{a, Tensor::from_vector<T>({lowest, 4})}}, {y}); },
                      ErrorCode::invalid_argument);
    BOOST_TEST(contains(m, "quotient"), m);
    BOOST_TEST(contains(m, "overflows"), m);
    BOOST_TEST(contains(m, std::to_string(lowest)), m);
    auto out = session.run({{a, Tensor::from_vector<T>({lowest + 1, 4})}}, {y});
    BOOST_TEST((out[0].template to_vector<T>() == std::vector<T>{T(-(lowest + 1)), 2}));
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_smallest_integer_divided_by_minus_one_fails_the_step_naming_the_node) {
  using Op = Output (*)(const Scope&, Output, Output);
  const std::pair<Op, const char*> quotients[] = {
      {ops::div, "div"}, {ops::truncate_div, "truncate_div"}, {ops::floor_div, "floor_div"}};
  for (auto [op, name] : quotients) {
    check_smallest_value_divided_by_minus_one_fails_naming_the_node<int32_t>(op, name);
    check_smallest_value_divided_by_minus_one_fails_naming_the_node<int64_t>(op, name);
  }
}

BOOST_AUTO_TEST_CASE(the_remainder_of_the_smallest_integer_by_minus_one_is_zero) {
  const int32_t lowest32 = std::numeric_limits<int32_t>::lowest();
  const int64_t lowest64 = std::numeric_limits<int64_t>::lowest();
  BOOST_TEST((run_integer_op<int32_t>(ops::truncate_mod, {lowest32, lowest32}, {-1, 3}) == std::vector<int32_t>{0, -2}));
  BOOST_TEST((run_integer_op<int32_t>(ops::floor_mod, {lowest32, lowest32}, {-1, 3}) == std::vector<int32_t>{0, 1}));
  BOOST_TEST((run_integer_op<int64_t>(ops::truncate_mod, {lowest64}, {-1}) == std::vector<int64_t>{0}));
  BOOST_TEST((run_integer_op<int64_t>(ops::floor_mod, {lowest64}, {-1}) == std::vector<int64_t>{0}));
}

BOOST_AUTO_TEST_CASE(integer_modulo_and_floor_division_by_zero_fail_the_step_naming_the_node) {
  using Op = Output (*)(const Scope&, Output, Output);
  const std::tuple<Op, const char*, const char*> cases[] = {
      {ops::truncate_mod, "remainder", "modulo by zero"},
      {ops::floor_mod, "floored_remainder", "modulo by zero"},
      {ops::floor_div, "floored_quotient", "division by zero"},
      {ops::truncate_div, "truncated_quotient", "division by zero"}};
  for (auto [op, name, what] : cases) {
    auto root = Scope::root();
    auto b = ops::placeholder(root, DType::int64, {2});
    auto y = op(root.with_op_name(name), ops::constant<int64_t>(root, {5, 6}, Shape{2}), b);
    Session session(root);
    auto m = error_of([&] { session.run({{b, Tensor::from_vector<int64_t>({3, 0})}}, {y}); },
                      ErrorCode::invalid_argument);
    BOOST_TEST(contains(m, name), m);
    BOOST_TEST(contains(m, what), m);
  }
}

BOOST_AUTO_TEST_CASE(integer_add_sub_mul_and_pow_wrap_around_in_twos_complement) {
  const int32_t max32 = std::numeric_limits<int32_t>::max(), min32 = std::numeric_limits<int32_t>::lowest();
  const int64_t max64 = std::numeric_limits<int64_t>::max(), min64 = std::numeric_limits<int64_t>::lowest();
  BOOST_TEST((run_integer_op<int32_t>(ops::add, {max32}, {1}) == std::vector<int32_t>{min32}));
  BOOST_TEST((run_integer_op<int32_t>(ops::sub, {min32}, {1}) == std::vector<int32_t>{max32}));
  BOOST_TEST((run_integer_op<int32_t>(ops::mul, {65536}, {65536}) == std::vector<int32_t>{0}));
  BOOST_TEST((run_integer_op<int64_t>(ops::add, {max64}, {1}) == std::vector<int64_t>{min64}));
  BOOST_TEST((run_integer_op<int64_t>(ops::mul, {min64}, {-1}) == std::vector<int64_t>{min64}));
  BOOST_TEST((run_integer_op<uint8_t>(ops::add, {250}, {10}) == std::vector<uint8_t>{4}));
  // Powers by squaring: 2^31 wraps to the smallest int32, and a huge exponent takes 31 steps.
  BOOST_TEST((run_integer_op<int32_t>(ops::pow, {2, -1, 3, 0}, {31, max32, 4, 0}) ==
              std::vector<int32_t>{min32, -1, 81, 1}));
  // 3^40 = 12157665459056928801 is past int64's range and wraps modulo 2^64.
  BOOST_TEST((run_integer_op<int64_t>(ops::pow, {3}, {40}) == std::vector<int64_t>{int64_t(12157665459056928801ull)}));
}
