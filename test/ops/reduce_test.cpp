// Sum, Mean and Max through a Session against a naive reference that walks every element,
// over each axis, pairs of axes, all axes, none, negative axes, with and without keep_dims.
// Tolerances: float32 abs 1e-6 + rel 1e-6 (the kernel accumulates in double and rounds once),
// float64 abs 1e-12 + rel 1e-14, float16 abs 1e-3 + rel 1e-3; integers exact (Mean of integers
// truncates towards zero).
#include <limits>
#include <optional>

#include "op_test.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

enum class Reduction { sum, mean, max };

Tolerance reduce_tolerance(DType dtype) {
  switch (dtype) {
    case DType::float32: return {1e-6, 1e-6};
    case DType::float64: return {1e-12, 1e-14};
    case DType::float16: return {1e-3, 1e-3};
    default: return {0, 0};
  }
}

struct Expected {
  Shape shape;
  std::vector<double> values;
};

Expected reference(Reduction r, const std::vector<double>& x, const Shape& in,
                   const std::optional<std::vector<int64_t>>& axes, bool keep_dims, bool integers) {
  std::vector<bool> reduced(std::size_t(in.rank()), !axes.has_value());
  if (axes)
    for (int64_t a : *axes) reduced[std::size_t(a < 0 ? a + in.rank() : a)] = true;
  Expected e;
  Shape kept;
  for (int d = 0; d < in.rank(); ++d) {
    kept.push_back(reduced[std::size_t(d)] ? 1 : in[d]);
    if (!reduced[std::size_t(d)]) e.shape.push_back(in[d]);
    else if (keep_dims) e.shape.push_back(1);
  }
  const double start = r == Reduction::max ? -std::numeric_limits<double>::infinity() : 0.0;
  e.values.assign(std::size_t(kept.num_elements()), start);
  std::vector<int64_t> count(e.values.size(), 0);
  for (int64_t i = 0; i < in.num_elements(); ++i) {
    int64_t rest = i, o = 0, stride = 1;
    for (int d = in.rank() - 1; d >= 0; --d) {
      int64_t coord = rest % in[d];
      rest /= in[d];
      if (!reduced[std::size_t(d)]) o += coord * stride;
      stride *= kept[d];
    }
    double v = x[std::size_t(i)];
    e.values[std::size_t(o)] = r == Reduction::max ? std::max(e.values[std::size_t(o)], v) : e.values[std::size_t(o)] + v;
    ++count[std::size_t(o)];
  }
  if (r == Reduction::mean)
    for (std::size_t o = 0; o < e.values.size(); ++o) {
      double m = count[o] ? e.values[o] / double(count[o]) : 0.0;
      e.values[o] = integers ? std::trunc(m) : m;
    }
  return e;
}

std::string axes_string(const std::optional<std::vector<int64_t>>& axes) {
  if (!axes) return "all";
  std::string s = "{";
  for (auto a : *axes) s += std::to_string(a) + ",";
  return s + "}";
}

// Every reduction over every axis set of a [3,4,5] input, fetched together in one step.
void check_reductions(DType dtype, uint32_t seed) {
  std::mt19937 rng(seed);
  const Shape shape{3, 4, 5};
  const bool integers = !is_floating(dtype);
  Tensor xv = integers ? random_tensor(rng, dtype, shape, -100, 100) : random_tensor(rng, dtype, shape, -1, 1);
  const std::optional<std::vector<int64_t>> axis_sets[] = {
      std::nullopt, std::vector<int64_t>{0}, std::vector<int64_t>{1}, std::vector<int64_t>{2},
      std::vector<int64_t>{-1}, std::vector<int64_t>{-3}, std::vector<int64_t>{0, 2},
      std::vector<int64_t>{1, -1}, std::vector<int64_t>{0, 1, 2}, std::vector<int64_t>{}};
  auto root = Scope::root();
  auto x = ops::placeholder(root, dtype, shape);
  struct Case {
    Reduction r;
    std::optional<std::vector<int64_t>> axes;
    bool keep;
    std::string what;
  };
  std::vector<Case> cases;
  std::vector<TensorName> fetches;
  for (Reduction r : {Reduction::sum, Reduction::mean, Reduction::max})
    for (auto& axes : axis_sets)
      for (bool keep : {false, true}) {
        auto build = r == Reduction::sum ? ops::sum : r == Reduction::mean ? ops::mean : ops::max;
        const char* name = r == Reduction::sum ? "sum" : r == Reduction::mean ? "mean" : "max";
        auto y = build(root, x, axes, keep);
        std::string what = std::string(name) + " " + name_of(dtype) + " over " + axes_string(axes) + (keep ? " keep_dims" : "");
        Expected e = reference(r, as_doubles(xv), shape, axes, keep, integers);
        BOOST_TEST((y.shape() == PartialShape(e.shape)), what << ": inferred " << y.shape().to_string());
        cases.push_back({r, axes, keep, what});
        fetches.push_back(y);
      }
  Session session(root);
  auto out = session.run({{x, xv}}, fetches);
  for (std::size_t k = 0; k < cases.size(); ++k) {
    Expected e = reference(cases[k].r, as_doubles(xv), shape, cases[k].axes, cases[k].keep, integers);
    check_close(out[k], dtype, e.shape, e.values, reduce_tolerance(dtype), cases[k].what);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(reductions_of_float32_over_every_axis_set_match_the_reference) {
  check_reductions(DType::float32, 1);
}

BOOST_AUTO_TEST_CASE(reductions_of_float64_over_every_axis_set_match_the_reference) {
  check_reductions(DType::float64, 2);
}

BOOST_AUTO_TEST_CASE(reductions_of_int32_are_exact_and_the_mean_truncates) {
  check_reductions(DType::int32, 3);
}

BOOST_AUTO_TEST_CASE(reductions_of_int64_are_exact) { check_reductions(DType::int64, 4); }

BOOST_AUTO_TEST_CASE(reductions_of_float16_match_the_reference_to_half_precision) {
  check_reductions(DType::float16, 5);
}

BOOST_AUTO_TEST_CASE(max_of_negative_values_is_the_largest_of_them) {
  auto root = Scope::root();
  auto yi = ops::max(root, ops::constant<int32_t>(root, {-5, -3, -9}, Shape{3}));
  auto yf = ops::max(root, ops::constant<float>(root, {-5e30f, -3e30f}, Shape{2}));
  Session session(root);
  auto out = session.run({yi, yf});
  BOOST_TEST(out[0].scalar_value<int32_t>() == -3);
  BOOST_TEST(out[1].scalar_value<float>() == -3e30f);
}

// Rows longer than the kernel's sixteen accumulators, with a tail after the last full sixteen:
// every element counts once, whichever lane or the tail holds it.
BOOST_AUTO_TEST_CASE(long_rows_are_summed_and_maxed_over_every_lane_and_the_tail) {
  const int64_t rows = 3, cols = 16 * 62 + 7;
  std::vector<int64_t> ints(std::size_t(rows * cols));
  std::vector<float> floats(ints.size());
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      ints[std::size_t(r * cols + c)] = c + r;
      floats[std::size_t(r * cols + c)] = 0.001f * float(c % 97) - 0.03f;
    }
  // Each row's largest value in another place: the last element (the tail), lane 5, lane 0.
  const int64_t top[] = {cols - 1, 16 * 30 + 5, 16 * 61};
  for (int64_t r = 0; r < rows; ++r) floats[std::size_t(r * cols + top[r])] = 7.0f + float(r);
  auto root = Scope::root();
  auto xi = ops::constant<int64_t>(root, ints, Shape{rows, cols});
  auto xf = ops::constant<float>(root, floats, Shape{rows, cols});
  const std::vector<int64_t> last{1};
  Session session(root);
  auto out = session.run({ops::sum(root, xi, last), ops::max(root, xi, last), ops::sum(root, xf, last),
                          ops::max(root, xf, last)});
  for (int64_t r = 0; r < rows; ++r) {
    double want = 0;
    for (int64_t c = 0; c < cols; ++c) want += double(floats[std::size_t(r * cols + c)]);
    BOOST_TEST(out[0].to_vector<int64_t>()[std::size_t(r)] == cols * (cols - 1) / 2 + r * cols);
    BOOST_TEST(out[1].to_vector<int64_t>()[std::size_t(r)] == cols - 1 + r);
    BOOST_TEST(std::abs(out[2].to_vector<float>()[std::size_t(r)] - want) <= 1e-6 * std::abs(want) + 1e-6,
               "row " << r << ": " << out[2].to_vector<float>()[std::size_t(r)] << " against " << want);
    BOOST_TEST(out[3].to_vector<float>()[std::size_t(r)] == 7.0f + float(r));
  }
}

BOOST_AUTO_TEST_CASE(sum_and_mean_of_an_empty_axis_are_zero) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, {0, 3});
  auto s = ops::sum(root, x, std::vector<int64_t>{0});
  auto m = ops::mean(root, x, std::vector<int64_t>{0});
  Session session(root);
  auto out = session.run({{x, Tensor(DType::float32, Shape{0, 3})}}, {s, m});
  check_close(out[0], DType::float32, Shape{3}, {0, 0, 0}, {0, 0}, "sum");
  check_close(out[1], DType::float32, Shape{3}, {0, 0, 0}, {0, 0}, "mean");
}

BOOST_AUTO_TEST_CASE(an_axis_out_of_range_is_refused_at_graph_build_time_naming_it) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, {2, 3, 4});
  for (int64_t axis : {3, -4}) {
    auto m = error_of([&] { ops::sum(root.with_op_name("total" + std::to_string(axis + 4)), x, std::vector<int64_t>{axis}); },
                      ErrorCode::invalid_argument);
    BOOST_TEST(contains(m, "Sum 'total"), m);
    BOOST_TEST(contains(m, "axis " + std::to_string(axis)), m);
    BOOST_TEST(contains(m, "rank 3"), m);
  }
}

BOOST_AUTO_TEST_CASE(an_axis_out_of_range_for_a_shape_known_at_run_time_fails_the_step) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float64);
  auto y = ops::mean(root.with_op_name("late_mean"), x, std::vector<int64_t>{2});
  Session session(root);
  auto m = error_of([&] { session.run({{x, Tensor::zeros(DType::float64, Shape{4, 4})}}, {y}); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "late_mean"), m);
  BOOST_TEST(contains(m, "axis 2"), m);
}

BOOST_AUTO_TEST_CASE(reductions_refuse_bool_at_graph_build_time) {
  auto root = Scope::root();
  auto b = ops::placeholder(root, DType::boolean, {2});
  auto m = error_of([&] { ops::sum(root, b); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "bool"), m);
}

BOOST_AUTO_TEST_CASE(a_reduction_of_a_tensor_above_rank_eight_is_refused_at_graph_build_time) {
  // A placeholder may declare any rank; a tensor has at most Shape::kMaxRank (8) dimensions.
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, PartialShape::of_rank(9));
  auto m = error_of([&] { ops::sum(root.with_op_name("deep_sum"), x); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "deep_sum"), m);
  BOOST_TEST(contains(m, "rank 9 cannot be reduced"), m);
}
