#pragma once
// Helpers shared by the op tests: random inputs, a naive broadcast, tolerances per dtype, and a
// comparison of a tensor the session produced against reference values computed in double.
#include <cmath>
#include <random>
#include <string>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "actors/session.hpp"
#include "core/tensor.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"

namespace troupe {
// Shapes print in failure messages.
inline std::ostream& operator<<(std::ostream& out, const Shape& s) { return out << s.to_string(); }
}  // namespace troupe

namespace troupe::testing {

// |actual - expected| <= abs + rel * |expected|.
struct Tolerance {
  double abs;
  double rel;
};

// For one elementwise operation computed in the dtype itself: a few units in the last place
// of float32 (eps 1.2e-7) and float64 (eps 2.2e-16); float16 results are rounded from float,
// so half a unit (4.9e-4) plus the float error. Integers and bools are exact.
inline Tolerance elementwise_tolerance(DType dtype) {
  switch (dtype) {
    case DType::float32: return {1e-30, 1e-6};
    case DType::float64: return {1e-300, 1e-14};
    case DType::float16: return {1e-7, 1e-3};
    default: return {0, 0};
  }
}

// Uniform values in [lo, hi]; integer dtypes draw integers, bool draws both values.
inline Tensor random_tensor(std::mt19937& rng, DType dtype, Shape shape, double lo, double hi) {
  Tensor t(dtype, shape);
  std::uniform_real_distribution<double> real(lo, hi);
  std::uniform_int_distribution<int64_t> integer(int64_t(std::ceil(lo)), int64_t(std::floor(hi)));
  visit_dtype(dtype, [&](auto zero) {
    using T = decltype(zero);
    T* p = t.data<T>();
    for (int64_t i = 0; i < t.num_elements(); ++i) {
      if constexpr (std::is_same_v<T, bool>) p[i] = rng() & 1;
      else if constexpr (std::is_same_v<T, half>) p[i] = half(float(real(rng)));
      else if constexpr (std::is_floating_point_v<T>) p[i] = T(real(rng));
      else p[i] = T(integer(rng));
    }
  });
  return t;
}

// The elements of a host tensor of any dtype, as doubles.
inline std::vector<double> as_doubles(const Tensor& t) {
  std::vector<double> out(std::size_t(t.num_elements()));
  visit_dtype(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    const T* p = t.data<T>();
    for (std::size_t i = 0; i < out.size(); ++i) {
      if constexpr (std::is_same_v<T, half>) out[i] = double(float(p[i]));
      else out[i] = double(p[i]);
    }
  });
  return out;
}

// The index into an operand of shape `in` that broadcasts to element `i` of shape `out`.
inline int64_t broadcast_index(const Shape& out, const Shape& in, int64_t i) {
  int64_t index = 0, stride = 1;
  for (int d = out.rank() - 1, e = in.rank() - 1; d >= 0; --d, --e) {
    int64_t coord = i % out[d];
    i /= out[d];
    if (e < 0) continue;
    if (in[e] != 1) index += coord * stride;
    stride *= in[e];
  }
  return index;
}

// Checks dtype, shape and every value, reporting the first few mismatches with `what`.
inline void check_close(const Tensor& actual, DType dtype, const Shape& shape,
                        const std::vector<double>& expected, Tolerance tol, const std::string& what) {
  BOOST_TEST_CONTEXT(what) {
    BOOST_TEST_REQUIRE(actual.is_initialized());
    BOOST_TEST(actual.dtype() == dtype);
    BOOST_TEST_REQUIRE(actual.shape() == shape);
    auto got = as_doubles(actual);
    int bad = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      double e = expected[i], g = got[i];
      bool same_special = (std::isnan(e) && std::isnan(g)) || (std::isinf(e) && e == g);
      if (!same_special && !(std::fabs(g - e) <= tol.abs + tol.rel * std::fabs(e))) {
        if (++bad <= 3) BOOST_ERROR("element " << i << ": got " << g << ", expected " << e);
      }
    }
    BOOST_TEST(bad == 0, bad << " of " << got.size() << " elements differ");
  }
}

}  // namespace troupe::testing
