// MatMul through a Session against a naive triple loop in double, for every combination of
// transposes. Tolerance: the classic bound for a dot product of length k,
// |error| <= k * eps * sum_p |a_ip * b_pj|, with eps of the dtype (float16: its eps 9.8e-4 for
// the final rounding plus float32's for the accumulation); integers are exact.
#include "op_test.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

double epsilon(DType dtype) {
  switch (dtype) {
    case DType::float32: return 1.2e-7;
    case DType::float64: return 2.3e-16;
    case DType::float16: return 1.2e-7;
    default: return 0;
  }
}

// A [m,k] x [k,n] product where a is stored transposed if ta and b if tb.
void check_matmul(DType dtype, int64_t m, int64_t k, int64_t n, bool ta, bool tb, uint32_t seed) {
  std::mt19937 rng(seed);
  const bool integers = !is_floating(dtype);
  const Shape sa = ta ? Shape{k, m} : Shape{m, k};
  const Shape sb = tb ? Shape{n, k} : Shape{k, n};
  Tensor av = random_tensor(rng, dtype, sa, integers ? -20 : -1, integers ? 20 : 1);
  Tensor bv = random_tensor(rng, dtype, sb, integers ? -20 : -1, integers ? 20 : 1);
  auto root = Scope::root();
  auto a = ops::placeholder(root, dtype, sa);
  auto b = ops::placeholder(root, dtype, sb);
  auto y = ops::matmul(root.with_op_name("mm"), a, b, {.transpose_a = ta, .transpose_b = tb});
  std::string what = std::string(name_of(dtype)) + " " + sa.to_string() + (ta ? "^T" : "") + " x " +
                     sb.to_string() + (tb ? "^T" : "");
  BOOST_TEST((y.shape() == PartialShape{m, n}), what);
  Session session(root);
  Tensor out = session.run({{a, av}, {b, bv}}, {y})[0];

  auto as = as_doubles(av), bs = as_doubles(bv);
  auto A = [&](int64_t i, int64_t p) { return ta ? as[p * m + i] : as[i * k + p]; };
  auto B = [&](int64_t p, int64_t j) { return tb ? bs[j * k + p] : bs[p * n + j]; };
  BOOST_TEST_CONTEXT(what) {
    BOOST_TEST(out.dtype() == dtype);
    BOOST_TEST_REQUIRE((out.shape() == Shape{m, n}));
    auto got = as_doubles(out);
    int bad = 0;
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0, magnitude = 0;
        for (int64_t p = 0; p < k; ++p) {
          sum += A(i, p) * B(p, j);
          magnitude += std::fabs(A(i, p) * B(p, j));
        }
        double bound = double(k) * epsilon(dtype) * magnitude;
        if (dtype == DType::float16) bound += 9.8e-4 * std::fabs(sum) + 1e-7;
        if (!(std::fabs(got[std::size_t(i * n + j)] - sum) <= bound) && ++bad <= 3)
          BOOST_ERROR("(" << i << "," << j << "): got " << got[std::size_t(i * n + j)] << ", expected " << sum);
      }
    BOOST_TEST(bad == 0);
  }
}

void check_all_transposes(DType dtype, int64_t m, int64_t k, int64_t n, uint32_t seed) {
  for (bool ta : {false, true})
    for (bool tb : {false, true}) check_matmul(dtype, m, k, n, ta, tb, seed++);
}

}  // namespace

BOOST_AUTO_TEST_CASE(matmul_without_transposes_matches_the_naive_product) {
  check_matmul(DType::float32, 7, 5, 3, false, false, 1);
  check_matmul(DType::float64, 7, 5, 3, false, false, 2);
}

BOOST_AUTO_TEST_CASE(matmul_with_a_transposed_matches_the_naive_product) {
  check_matmul(DType::float32, 7, 5, 3, true, false, 3);
  check_matmul(DType::float64, 7, 5, 3, true, false, 4);
}

BOOST_AUTO_TEST_CASE(matmul_with_b_transposed_matches_the_naive_product) {
  check_matmul(DType::float32, 7, 5, 3, false, true, 5);
  check_matmul(DType::float64, 7, 5, 3, false, true, 6);
}

BOOST_AUTO_TEST_CASE(matmul_with_both_transposes_matches_the_naive_product) {
  check_matmul(DType::float32, 7, 5, 3, true, true, 7);
  check_matmul(DType::float64, 7, 5, 3, true, true, 8);
}

BOOST_AUTO_TEST_CASE(a_64x128_by_128x32_product_matches_the_naive_product_under_every_transpose) {
  check_all_transposes(DType::float32, 64, 128, 32, 10);
  check_all_transposes(DType::float64, 64, 128, 32, 20);
}

BOOST_AUTO_TEST_CASE(matmul_of_vectors_shaped_as_matrices_gives_inner_and_outer_products) {
  check_all_transposes(DType::float32, 1, 9, 1, 30);
  check_all_transposes(DType::float64, 6, 1, 4, 40);
}

BOOST_AUTO_TEST_CASE(integer_matmul_is_exact_under_every_transpose) {
  check_all_transposes(DType::int32, 7, 5, 3, 50);
  check_all_transposes(DType::int64, 4, 6, 5, 60);
}

BOOST_AUTO_TEST_CASE(float16_matmul_matches_the_naive_product_to_half_precision) {
  check_all_transposes(DType::float16, 7, 5, 3, 70);
}

BOOST_AUTO_TEST_CASE(matmul_with_an_empty_inner_dimension_gives_zeros) {
  check_matmul(DType::float32, 3, 0, 4, false, false, 80);
  check_matmul(DType::float64, 3, 0, 4, true, true, 81);
}

BOOST_AUTO_TEST_CASE(matmul_with_no_rows_gives_an_empty_result) {
  check_matmul(DType::float32, 0, 5, 3, false, false, 90);
  check_matmul(DType::float32, 4, 5, 0, false, true, 91);
}

BOOST_AUTO_TEST_CASE(inner_dimensions_that_differ_are_refused_at_graph_build_time_naming_the_shapes) {
  auto root = Scope::root();
  auto a = ops::placeholder(root, DType::float32, {7, 5});
  auto b = ops::placeholder(root, DType::float32, {4, 3});
  auto m = error_of([&] { ops::matmul(root.with_op_name("dense"), a, b); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "MatMul 'dense'"), m);
  BOOST_TEST(contains(m, "inner dimensions differ"), m);
  BOOST_TEST(contains(m, "[7,5] x [4,3]"), m);
  // Transposing a makes its inner dimension 7, which differs from b's 5 rows.
  auto b5 = ops::placeholder(root, DType::float32, {5, 3});
  m = error_of([&] { ops::matmul(root.with_op_name("dense_t"), a, b5, {.transpose_a = true}); },
               ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "[7,5]^T x [5,3]"), m);
  BOOST_TEST(ops::matmul(root, a, b5).node() != nullptr);  // while the plain product is fine
}

BOOST_AUTO_TEST_CASE(inner_dimensions_that_differ_at_run_time_fail_the_step_naming_the_node) {
  auto root = Scope::root();
  auto a = ops::placeholder(root, DType::float64, {-1, -1});
  auto b = ops::placeholder(root, DType::float64, {-1, -1});
  auto y = ops::matmul(root.with_op_name("late_mm"), a, b);
  Session session(root);
  auto m = error_of([&] {
    session.run({{a, Tensor::zeros(DType::float64, Shape{2, 3})}, {b, Tensor::zeros(DType::float64, Shape{4, 2})}}, {y});
  }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "late_mm"), m);
  BOOST_TEST(contains(m, "inner dimensions differ"), m);
  BOOST_TEST(contains(m, "[2,3] x [4,2]"), m);
}

BOOST_AUTO_TEST_CASE(matmul_refuses_non_matrices_and_bools_at_graph_build_time) {
  auto root = Scope::root();
  auto v = ops::placeholder(root, DType::float32, {5});
  auto w = ops::placeholder(root, DType::float32, {5, 2});
  auto m = error_of([&] { ops::matmul(root, v, w); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "matrices"), m);
  BOOST_TEST(contains(m, "[5]"), m);
  auto flags = ops::placeholder(root, DType::boolean, {2, 2});
  m = error_of([&] { ops::matmul(root, flags, flags); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "bool"), m);
}
