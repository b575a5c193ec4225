// DTypes: sizes, names, and the float16 conversions checked against the definition of
// round-to-nearest-even on every bit pattern.
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include <boost/test/unit_test.hpp>

#include "core/dtype.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

const DType kAll[] = {DType::float32, DType::float16, DType::float64, DType::int32,
                      DType::int64,   DType::uint8,   DType::boolean};

half from_bits(uint16_t bits) {
  half h;
  h.bits = bits;
  return h;
}

bool is_nan_bits(uint16_t bits) { return (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0; }

// Whether `h` is a correct round-to-nearest-even of the finite float f, judged against its
// neighbours on the float16 grid (computed in double, where every float16 is exact).
bool is_nearest_even(float f, half h) {
  double x = f, got = float(h);
  if (std::isinf(got)) return std::fabs(x) >= 65520.0 && (got > 0) == (x > 0);
  if (std::fabs(x) >= 65520.0) return false;
  uint16_t magnitude = h.bits & 0x7fffu;
  double error = std::fabs(got - x);
  for (int step : {-1, 1}) {
    int neighbour = int(magnitude) + step;
    if (neighbour < 0 || neighbour > 0x7bff) continue;
    double other = std::fabs(float(from_bits(uint16_t(neighbour))));
    double other_error = std::fabs(other - std::fabs(x));
    if (other_error < error) return false;
    if (other_error == error && (magnitude & 1u)) return false;  // a tie must go to even
  }
  return true;
}

}  // namespace

BOOST_AUTO_TEST_CASE(every_dtype_has_its_size_and_a_name_that_parses_back) {
  const std::size_t sizes[] = {4, 2, 8, 4, 8, 1, 1};
  const char* names[] = {"float32", "float16", "float64", "int32", "int64", "uint8", "bool"};
  for (int i = 0; i < 7; ++i) {
    BOOST_TEST(size_of(kAll[i]) == sizes[i], names[i]);
    BOOST_TEST(std::string(name_of(kAll[i])) == names[i]);
    BOOST_TEST(int(dtype_from_name(names[i])) == int(kAll[i]));
  }
  BOOST_TEST(size_of(DType::invalid) == 0u);
  BOOST_TEST(std::string(name_of(DType::invalid)) == "invalid");
}

BOOST_AUTO_TEST_CASE(an_unknown_dtype_name_is_refused_naming_it) {
  auto m = error_of([] { dtype_from_name("float128"); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "'float128'"), m);
}

BOOST_AUTO_TEST_CASE(dtypes_are_classified_as_floating_or_integer) {
  for (DType d : kAll) {
    bool floating = d == DType::float32 || d == DType::float16 || d == DType::float64;
    bool integer = d == DType::int32 || d == DType::int64 || d == DType::uint8;
    BOOST_TEST(is_floating(d) == floating, name_of(d));
    BOOST_TEST(is_integer(d) == integer, name_of(d));
  }
}

BOOST_AUTO_TEST_CASE(cpp_types_map_to_their_dtypes_and_visit_back) {
  BOOST_TEST(int(dtype_v<float>) == int(DType::float32));
  BOOST_TEST(int(dtype_v<half>) == int(DType::float16));
  BOOST_TEST(int(dtype_v<double>) == int(DType::float64));
  BOOST_TEST(int(dtype_v<int32_t>) == int(DType::int32));
  BOOST_TEST(int(dtype_v<int64_t>) == int(DType::int64));
  BOOST_TEST(int(dtype_v<uint8_t>) == int(DType::uint8));
  BOOST_TEST(int(dtype_v<bool>) == int(DType::boolean));
  for (DType d : kAll) {
    DType visited = visit_dtype(d, [](auto zero) { return dtype_v<decltype(zero)>; });
    BOOST_TEST(int(visited) == int(d), name_of(d));
  }
  error_of([] { visit_dtype(DType::invalid, [](auto) { return 0; }); }, ErrorCode::invalid_argument);
}

BOOST_AUTO_TEST_CASE(every_float16_bit_pattern_survives_a_round_trip_through_float) {
  int mismatches = 0;
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    half h = from_bits(uint16_t(bits));
    float f = float(h);
    if (is_nan_bits(uint16_t(bits))) {
      if (!std::isnan(f) || !is_nan_bits(half(f).bits)) ++mismatches;
    } else if (half(f).bits != bits) {
      if (++mismatches < 5) BOOST_TEST_MESSAGE("bits " << bits << " came back as " << half(f).bits);
    }
  }
  BOOST_TEST(mismatches == 0);
}

BOOST_AUTO_TEST_CASE(float16_decodes_the_landmark_values_exactly) {
  BOOST_TEST(float(from_bits(0x3c00)) == 1.0f);
  BOOST_TEST(float(from_bits(0xc000)) == -2.0f);
  BOOST_TEST(float(from_bits(0x7bff)) == 65504.0f);               // largest finite
  BOOST_TEST(float(from_bits(0x0400)) == std::ldexp(1.0f, -14));  // smallest normal
  BOOST_TEST(float(from_bits(0x0001)) == std::ldexp(1.0f, -24));  // smallest subnormal
  BOOST_TEST(float(from_bits(0x03ff)) == std::ldexp(1023.0f, -24));
  BOOST_TEST(std::isinf(float(from_bits(0x7c00))));
  BOOST_TEST(std::signbit(float(from_bits(0x8000))));
  BOOST_TEST(float(from_bits(0x8000)) == 0.0f);
}

BOOST_AUTO_TEST_CASE(float16_rounds_ties_to_even) {
  const float ulp = std::ldexp(1.0f, -10);  // of values in [1, 2)
  BOOST_TEST(float(half(1.0f + ulp / 2)) == 1.0f);                  // tie, 1.0 is even
  BOOST_TEST(float(half(1.0f + 3 * ulp / 2)) == 1.0f + 2 * ulp);    // tie, rounds up to even
  BOOST_TEST(float(half(1.0f + ulp / 2 + ulp / 1024)) == 1.0f + ulp);  // just past the tie
  BOOST_TEST(float(half(1.0f + ulp / 2 - ulp / 1024)) == 1.0f);        // just before it
  BOOST_TEST(float(half(-1.0f - 3 * ulp / 2)) == -1.0f - 2 * ulp);  // the same for negatives
  // A carry out of the mantissa moves to the next binade.
  BOOST_TEST(float(half(2.0f - ulp / 4)) == 2.0f);
}

BOOST_AUTO_TEST_CASE(float16_overflows_to_infinity_only_past_the_largest_finite_tie) {
  BOOST_TEST(float(half(65504.0f)) == 65504.0f);
  BOOST_TEST(float(half(65519.0f)) == 65504.0f);
  BOOST_TEST(std::isinf(float(half(65520.0f))));  // the tie with 65536 goes to "even", infinity
  BOOST_TEST(float(half(-1e6f)) == -std::numeric_limits<float>::infinity());
  BOOST_TEST(float(half(std::numeric_limits<float>::infinity())) == std::numeric_limits<float>::infinity());
  BOOST_TEST(std::isnan(float(half(std::numeric_limits<float>::quiet_NaN()))));
}

BOOST_AUTO_TEST_CASE(float16_rounds_into_and_out_of_the_subnormal_range) {
  const float tiny = std::ldexp(1.0f, -24);
  BOOST_TEST(float(half(tiny)) == tiny);
  BOOST_TEST(half(tiny / 2).bits == 0u);                  // tie with zero goes to zero
  BOOST_TEST(float(half(tiny * 0.75f)) == tiny);          // nearer the smallest subnormal
  BOOST_TEST(half(tiny / 4).bits == 0u);
  BOOST_TEST(half(-tiny / 4).bits == 0x8000u);            // keeps the sign of zero
  BOOST_TEST(float(half(tiny * 2.5f)) == tiny * 2);       // tie between 2 and 3 ulps, even
  BOOST_TEST(float(half(tiny * 3.5f)) == tiny * 4);
  BOOST_TEST(float(half(std::ldexp(1.0f, -14) - tiny / 4)) == std::ldexp(1.0f, -14));
  BOOST_TEST(half(1e-30f).bits == 0u);
}

BOOST_AUTO_TEST_CASE(float16_conversion_of_random_floats_picks_the_nearest_even_neighbour) {
  std::mt19937 rng(20240601);
  std::uniform_real_distribution<float> exponent(-26.0f, 16.5f);
  std::uniform_int_distribution<int> sign(0, 1);
  int failures = 0;
  for (int i = 0; i < 200000; ++i) {
    float f = std::exp2(exponent(rng)) * (sign(rng) ? -1.0f : 1.0f);
    if (!is_nearest_even(f, half(f)) && ++failures < 5)
      BOOST_TEST_MESSAGE(f << " became " << float(half(f)));
  }
  BOOST_TEST(failures == 0);
}

BOOST_AUTO_TEST_CASE(float16_values_compare_by_value) {
  BOOST_TEST((half(0.0f) == half(-0.0f)));
  BOOST_TEST((half(1.5f) == half(1.5f)));
  BOOST_TEST(!(half(1.5f) == half(1.0f)));
}
