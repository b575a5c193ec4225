// Array ops through a Session: Reshape, Transpose (against a naive index permutation), Cast,
// Fill, ZerosLike, OnesLike, and the basic Const, Placeholder, Identity and NoOp. All of these
// move or convert values without arithmetic, so results are compared exactly.
#include <limits>
#include <numeric>

#include "op_test.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

const Tolerance kExact{0, 0};

Tensor run_one(const Scope& root, Output y, const FeedList& feeds = {}) {
  Session session(root);
  return session.run(feeds, {y})[0];
}

// Naive transpose: output coordinate i of each element is input coordinate perm[i].
std::vector<double> transposed(const std::vector<double>& x, const Shape& in, const std::vector<int64_t>& perm, Shape& out) {
  out = Shape();
  for (auto p : perm) out.push_back(in[int(p)]);
  std::vector<double> y(x.size());
  for (int64_t j = 0; j < out.num_elements(); ++j) {
    std::vector<int64_t> c_in(std::size_t(in.rank()));
    int64_t rest = j;
    for (int d = out.rank() - 1; d >= 0; --d) {
      c_in[std::size_t(perm[std::size_t(d)])] = rest % out[d];
      rest /= out[d];
    }
    int64_t i = 0;
    for (int d = 0; d < in.rank(); ++d) i = i * in[d] + c_in[std::size_t(d)];
    y[std::size_t(j)] = x[std::size_t(i)];
  }
  return y;
}

}  // namespace

BOOST_AUTO_TEST_CASE(reshape_keeps_the_elements_in_order_and_infers_one_minus_one) {
  std::mt19937 rng(1);
  Tensor xv = random_tensor(rng, DType::float32, Shape{3, 4, 5}, -1, 1);
  auto expected = as_doubles(xv);
  const std::pair<std::vector<int64_t>, Shape> cases[] = {
      {{-1, 10}, Shape{6, 10}}, {{5, -1, 2}, Shape{5, 6, 2}}, {{60}, Shape{60}},
      {{-1}, Shape{60}},        {{2, 2, 3, 5}, Shape{2, 2, 3, 5}}, {{1, 60, 1}, Shape{1, 60, 1}}};
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, {3, 4, 5});
  std::vector<TensorName> fetches;
  for (auto& [requested, shape] : cases) {
    auto y = ops::reshape(root, x, requested);
    BOOST_TEST((y.shape() == PartialShape(shape)));
    fetches.push_back(y);
  }
  Session session(root);
  auto out = session.run({{x, xv}}, fetches);
  for (std::size_t k = 0; k < out.size(); ++k)
    check_close(out[k], DType::float32, cases[k].second, expected, kExact, "reshape to " + cases[k].second.to_string());
}

BOOST_AUTO_TEST_CASE(reshape_turns_a_single_element_into_a_scalar_and_back) {
  auto root = Scope::root();
  auto s = ops::reshape(root, ops::constant<int32_t>(root, {42}, Shape{1, 1}), {});
  auto back = ops::reshape(root, s, {1, -1});
  Session session(root);
  auto out = session.run({s, back});
  check_close(out[0], DType::int32, Shape{}, {42}, kExact, "scalar");
  check_close(out[1], DType::int32, Shape{1, 1}, {42}, kExact, "matrix");
}

BOOST_AUTO_TEST_CASE(reshape_to_another_element_count_is_refused_at_graph_build_time_naming_the_shapes) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, {3, 4});
  auto m = error_of([&] { ops::reshape(root.with_op_name("r1"), x, {5, 2}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "Reshape 'r1'"), m);
  BOOST_TEST(contains(m, "[3,4]"), m);
  BOOST_TEST(contains(m, "[5,2]"), m);
  BOOST_TEST(contains(m, "12"), m);
  m = error_of([&] { ops::reshape(root.with_op_name("r2"), x, {5, -1}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "Reshape 'r2'"), m);
  BOOST_TEST(contains(m, "12 elements"), m);
  m = error_of([&] { ops::reshape(root.with_op_name("r3"), x, {-1, -1}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "more than one -1"), m);
}

BOOST_AUTO_TEST_CASE(reshape_of_a_shape_known_only_at_run_time_fails_the_step_naming_the_node) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32);
  auto y = ops::reshape(root.with_op_name("late_reshape"), x, {-1, 4});
  Session session(root);
  auto m = error_of([&] { session.run({{x, Tensor::zeros(DType::float32, Shape{3, 3})}}, {y}); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "late_reshape"), m);
  BOOST_TEST(contains(m, "9 elements"), m);
  // A feed that fits runs.
  check_close(session.run({{x, Tensor::zeros(DType::float32, Shape{2, 6})}}, {y})[0], DType::float32,
              Shape{3, 4}, std::vector<double>(12, 0.0), kExact, "fits");
}

BOOST_AUTO_TEST_CASE(transpose_with_a_permutation_matches_the_naive_index_permutation) {
  std::mt19937 rng(2);
  const std::vector<std::vector<int64_t>> perms = {{0, 1, 2}, {1, 2, 0}, {2, 0, 1}, {0, 2, 1}, {2, 1, 0}, {1, 0, 2}};
  for (DType dtype : {DType::float32, DType::float64, DType::int32, DType::float16, DType::boolean, DType::uint8}) {
    Tensor xv = random_tensor(rng, dtype, Shape{2, 3, 4}, 0, 100);
    auto root = Scope::root();
    auto x = ops::placeholder(root, dtype, {2, 3, 4});
    std::vector<TensorName> fetches;
    for (auto& perm : perms) fetches.push_back(ops::transpose(root, x, perm));
    Session session(root);
    auto out = session.run({{x, xv}}, fetches);
    for (std::size_t k = 0; k < perms.size(); ++k) {
      Shape shape;
      auto expected = transposed(as_doubles(xv), xv.shape(), perms[k], shape);
      check_close(out[k], dtype, shape, expected, kExact, std::string("transpose ") + name_of(dtype) + " by perm " + std::to_string(k));
    }
  }
}

BOOST_AUTO_TEST_CASE(transpose_without_a_permutation_reverses_the_dimensions) {
  std::mt19937 rng(3);
  for (Shape shape : {Shape{7, 5}, Shape{2, 3, 4, 5}, Shape{6}}) {
    Tensor xv = random_tensor(rng, DType::float64, shape, -1, 1);
    std::vector<int64_t> reverse(std::size_t(shape.rank()));
    std::iota(reverse.rbegin(), reverse.rend(), 0);
    Shape out_shape;
    auto expected = transposed(as_doubles(xv), shape, reverse, out_shape);
    auto root = Scope::root();
    auto x = ops::placeholder(root, DType::float64, shape);
    check_close(run_one(root, ops::transpose(root, x), {{x, xv}}), DType::float64, out_shape, expected,
                kExact, "default transpose of " + shape.to_string());
  }
}

BOOST_AUTO_TEST_CASE(transpose_refuses_a_non_permutation_at_graph_build_time) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, {2, 3, 4});
  auto m = error_of([&] { ops::transpose(root.with_op_name("t1"), x, {0, 0, 1}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "Transpose 't1'"), m);
  BOOST_TEST(contains(m, "not a permutation"), m);
  m = error_of([&] { ops::transpose(root.with_op_name("t2"), x, {1, 0}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "rank 3"), m);
}

BOOST_AUTO_TEST_CASE(cast_from_float_truncates_towards_zero_and_maps_nonzero_to_true) {
  auto root = Scope::root();
  auto x = ops::constant<float>(root, {-2.7f, -0.5f, 0.0f, 0.5f, 2.7f, 100.9f}, Shape{2, 3});
  Session session(root);
  auto out = session.run({ops::cast(root, x, DType::int32), ops::cast(root, x, DType::int64),
                          ops::cast(root, x, DType::boolean), ops::cast(root, x, DType::float64),
                          ops::cast(root, x, DType::float16)});
  check_close(out[0], DType::int32, Shape{2, 3}, {-2, 0, 0, 0, 2, 100}, kExact, "to int32");
  check_close(out[1], DType::int64, Shape{2, 3}, {-2, 0, 0, 0, 2, 100}, kExact, "to int64");
  check_close(out[2], DType::boolean, Shape{2, 3}, {1, 1, 0, 1, 1, 1}, kExact, "to bool");
  check_close(out[3], DType::float64, Shape{2, 3},
              {double(-2.7f), -0.5, 0, 0.5, double(2.7f), double(100.9f)}, kExact, "to float64");
  std::vector<double> halves;
  for (float f : {-2.7f, -0.5f, 0.0f, 0.5f, 2.7f, 100.9f}) halves.push_back(float(half(f)));
  check_close(out[4], DType::float16, Shape{2, 3}, halves, kExact, "to float16");
}

BOOST_AUTO_TEST_CASE(cast_of_random_values_between_float_and_integer_types_matches_the_reference) {
  std::mt19937 rng(4);
  Tensor fv = random_tensor(rng, DType::float32, Shape{8, 9}, -1000, 1000);
  Tensor dv = random_tensor(rng, DType::float64, Shape{8, 9}, -1e6, 1e6);
  Tensor iv = random_tensor(rng, DType::int32, Shape{8, 9}, -16777216, 16777216);
  auto root = Scope::root();
  auto f = ops::constant(root, fv);
  auto d = ops::constant(root, dv);
  auto i = ops::constant(root, iv);
  Session session(root);
  auto out = session.run({ops::cast(root, f, DType::int32), ops::cast(root, d, DType::float32),
                          ops::cast(root, i, DType::float32), ops::cast(root, i, DType::float64),
                          ops::cast(root, d, DType::int64)});
  std::vector<double> trunc_f, round_d, trunc_d;
  for (double v : as_doubles(fv)) trunc_f.push_back(std::trunc(v));
  for (double v : as_doubles(dv)) round_d.push_back(double(float(v)));
  for (double v : as_doubles(dv)) trunc_d.push_back(std::trunc(v));
  check_close(out[0], DType::int32, Shape{8, 9}, trunc_f, kExact, "float32 to int32");
  check_close(out[1], DType::float32, Shape{8, 9}, round_d, kExact, "float64 to float32");
  check_close(out[2], DType::float32, Shape{8, 9}, as_doubles(iv), kExact, "int32 to float32 (|v| <= 2^24)");
  check_close(out[3], DType::float64, Shape{8, 9}, as_doubles(iv), kExact, "int32 to float64");
  check_close(out[4], DType::int64, Shape{8, 9}, trunc_d, kExact, "float64 to int64");
}

BOOST_AUTO_TEST_CASE(cast_from_bool_and_integers_gives_zero_and_one_or_true_and_false) {
  auto root = Scope::root();
  auto b = ops::constant<bool>(root, {true, false, true}, Shape{3});
  auto i = ops::constant<int32_t>(root, {-3, 0, 7}, Shape{3});
  auto h = ops::constant<half>(root, {half(0.5f), half(0.0f), half(-65504.0f)}, Shape{3});
  Session session(root);
  auto out = session.run({ops::cast(root, b, DType::float32), ops::cast(root, b, DType::int32),
                          ops::cast(root, i, DType::boolean), ops::cast(root, i, DType::uint8),
                          ops::cast(root, h, DType::float32), ops::cast(root, h, DType::boolean),
                          ops::cast(root, i, DType::int32)});
  check_close(out[0], DType::float32, Shape{3}, {1, 0, 1}, kExact, "bool to float32");
  check_close(out[1], DType::int32, Shape{3}, {1, 0, 1}, kExact, "bool to int32");
  check_close(out[2], DType::boolean, Shape{3}, {1, 0, 1}, kExact, "int32 to bool");
  check_close(out[3], DType::uint8, Shape{3}, {253, 0, 7}, kExact, "int32 to uint8 wraps modulo 256");
  check_close(out[4], DType::float32, Shape{3}, {0.5, 0, -65504}, kExact, "float16 to float32");
  check_close(out[5], DType::boolean, Shape{3}, {1, 0, 1}, kExact, "float16 to bool");
  check_close(out[6], DType::int32, Shape{3}, {-3, 0, 7}, kExact, "int32 to itself");
}

BOOST_AUTO_TEST_CASE(cast_of_nan_infinities_and_out_of_range_floats_to_integers_saturates) {
  const float inf = std::numeric_limits<float>::infinity(), nan = std::numeric_limits<float>::quiet_NaN();
  auto root = Scope::root();
  auto f = ops::constant<float>(root, {nan, inf, -inf, 3e9f, -3e9f, 2147483520.0f, 300.7f, -0.9f}, Shape{8});
  auto d = ops::constant<double>(root, {std::nan(""), 1e300, -1e300, 2147483647.5, -2147483648.9, 9.2e18, -1, 255.9},
                                 Shape{8});
  auto h = ops::constant<half>(root, {half(nan), half(inf), half(-inf), half(60000.0f), half(-1.5f)}, Shape{5});
  Session session(root);
  auto out = session.run({ops::cast(root, f, DType::int32), ops::cast(root, f, DType::int64),
                          ops::cast(root, f, DType::uint8), ops::cast(root, d, DType::int32),
                          ops::cast(root, d, DType::int64), ops::cast(root, d, DType::uint8),
                          ops::cast(root, h, DType::int32), ops::cast(root, h, DType::uint8)});
  using L32 = std::numeric_limits<int32_t>;
  using L64 = std::numeric_limits<int64_t>;
  BOOST_TEST((out[0].to_vector<int32_t>() ==
              std::vector<int32_t>{0, L32::max(), L32::lowest(), L32::max(), L32::lowest(), 2147483520, 300, 0}));
  BOOST_TEST((out[1].to_vector<int64_t>() ==
              std::vector<int64_t>{0, L64::max(), L64::lowest(), 3000000000, -3000000000, 2147483520, 300, 0}));
  BOOST_TEST((out[2].to_vector<uint8_t>() == std::vector<uint8_t>{0, 255, 0, 255, 0, 255, 255, 0}));
  BOOST_TEST((out[3].to_vector<int32_t>() ==
              std::vector<int32_t>{0, L32::max(), L32::lowest(), L32::max(), L32::lowest(), L32::max(), -1, 255}));
  BOOST_TEST((out[4].to_vector<int64_t>() ==
              std::vector<int64_t>{0, L64::max(), L64::lowest(), 2147483647, -2147483648, 9200000000000000000, -1, 255}));
  BOOST_TEST((out[5].to_vector<uint8_t>() == std::vector<uint8_t>{0, 255, 0, 255, 0, 255, 0, 255}));
  BOOST_TEST((out[6].to_vector<int32_t>() == std::vector<int32_t>{0, L32::max(), L32::lowest(), 60000, -1}));
  BOOST_TEST((out[7].to_vector<uint8_t>() == std::vector<uint8_t>{0, 255, 0, 255, 0}));
}

BOOST_AUTO_TEST_CASE(fill_repeats_a_scalar_over_the_shape) {
  auto root = Scope::root();
  auto v = ops::placeholder(root, DType::float64, Shape{});
  Session session(root);
  auto out = session.run({{v, Tensor::scalar(2.25)}},
                         {ops::fill(root, Shape{2, 3}, ops::constant(root, 7.5f)),
                          ops::fill(root, Shape{4}, ops::constant<int32_t>(root, -4)),
                          ops::fill(root, Shape{2, 2}, ops::constant(root, true)),
                          ops::fill(root, Shape{3, 1}, v), ops::fill(root, Shape{}, v),
                          ops::fill(root, Shape{0, 5}, v)});
  check_close(out[0], DType::float32, Shape{2, 3}, std::vector<double>(6, 7.5), kExact, "float32");
  check_close(out[1], DType::int32, Shape{4}, std::vector<double>(4, -4), kExact, "int32");
  check_close(out[2], DType::boolean, Shape{2, 2}, std::vector<double>(4, 1), kExact, "bool");
  check_close(out[3], DType::float64, Shape{3, 1}, std::vector<double>(3, 2.25), kExact, "fed value");
  check_close(out[4], DType::float64, Shape{}, {2.25}, kExact, "scalar");
  check_close(out[5], DType::float64, Shape{0, 5}, {}, kExact, "empty");
}

BOOST_AUTO_TEST_CASE(fill_with_a_value_that_is_not_a_scalar_is_refused_at_graph_build_time) {
  auto root = Scope::root();
  auto v = ops::constant<float>(root, {1, 2}, Shape{2});
  auto m = error_of([&] { ops::fill(root.with_op_name("filler"), Shape{3}, v); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "Fill 'filler'"), m);
  BOOST_TEST(contains(m, "scalar"), m);
  BOOST_TEST(contains(m, "[2]"), m);
}

BOOST_AUTO_TEST_CASE(zeros_like_and_ones_like_keep_dtype_and_shape) {
  std::mt19937 rng(5);
  for (DType dtype : {DType::float32, DType::float64, DType::float16, DType::int32, DType::int64,
                      DType::uint8, DType::boolean}) {
    Tensor xv = random_tensor(rng, dtype, Shape{3, 2}, 1, 9);
    auto root = Scope::root();
    auto x = ops::placeholder(root, dtype);
    Session session(root);
    auto out = session.run({{x, xv}}, {ops::zeros_like(root, x), ops::ones_like(root, x)});
    check_close(out[0], dtype, Shape{3, 2}, std::vector<double>(6, 0), kExact, std::string("zeros_like ") + name_of(dtype));
    check_close(out[1], dtype, Shape{3, 2}, std::vector<double>(6, 1), kExact, std::string("ones_like ") + name_of(dtype));
  }
}

BOOST_AUTO_TEST_CASE(constant_identity_and_placeholder_pass_values_through_unchanged) {
  std::mt19937 rng(6);
  Tensor cv = random_tensor(rng, DType::int64, Shape{4, 3}, -1000, 1000);
  Tensor fed = random_tensor(rng, DType::float32, Shape{2, 5}, -1, 1);
  auto root = Scope::root();
  auto c = ops::constant(root, cv);
  auto p = ops::placeholder(root, DType::float32, {-1, 5});
  Session session(root);
  auto out = session.run({{p, fed}}, {c, ops::identity(root, c), ops::identity(root, p), ops::constant(root, 3.5)});
  check_close(out[0], DType::int64, Shape{4, 3}, as_doubles(cv), kExact, "constant");
  check_close(out[1], DType::int64, Shape{4, 3}, as_doubles(cv), kExact, "identity of constant");
  check_close(out[2], DType::float32, Shape{2, 5}, as_doubles(fed), kExact, "identity of placeholder");
  check_close(out[3], DType::float64, Shape{}, {3.5}, kExact, "scalar constant");
}

BOOST_AUTO_TEST_CASE(a_constant_keeps_its_own_copy_of_the_value) {
  Tensor v = Tensor::from_vector<float>({1, 2, 3});
  auto root = Scope::root();
  auto c = ops::constant(root, v);
  v.data<float>()[0] = 100;  // changing the caller's tensor afterwards changes nothing
  check_close(run_one(root, c), DType::float32, Shape{3}, {1, 2, 3}, kExact, "constant");
}

BOOST_AUTO_TEST_CASE(no_op_and_group_run_as_targets_and_produce_nothing) {
  auto root = Scope::root();
  auto a = ops::constant(root, 1.0f);
  auto b = ops::neg(root, a);
  auto g = ops::group(root, {a, b});
  auto n = ops::no_op(root);
  Session session(root);
  BOOST_TEST(session.run({}, {}, {g}).empty());
  BOOST_TEST(session.run({}, {}, {n}).empty());
  BOOST_TEST(session.run({}, {b}, {g})[0].scalar_value<float>() == -1.0f);
}
