// The float16 wire conversion (core/wire/float16.hpp): exhaustive over float16 bit patterns,
// and against a reference rounding computed in double for random float32 values.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <vector>

#include <boost/test/unit_test.hpp>

#include "core/dtype.hpp"
#include "core/wire/float16.hpp"

using namespace troupe;

namespace {

bool is_nan_half(uint16_t bits) { return (bits & 0x7c00u) == 0x7c00u && (bits & 0x3ffu) != 0; }
bool is_quiet_nan_half(uint16_t bits) { return is_nan_half(bits) && (bits & 0x200u) != 0; }

uint16_t narrow(float x) {
  uint16_t h;
  float32_to_float16(&x, &h, 1);
  return h;
}

float widen(uint16_t h) {
  float x;
  float16_to_float32(&h, &x, 1);
  return x;
}

float round_trip(float x) { return widen(narrow(x)); }

float from_float_bits(uint32_t bits) { return std::bit_cast<float>(bits); }

// Round to nearest, ties to even, onto the float16 grid, computed in double from the
// definition: the grid step is 2^(e - 10) for |x| in [2^e, 2^(e+1)), and 2^-24 below 2^-14.
double reference_float16(float x) {
  double magnitude = std::fabs(double(x));
  if (magnitude >= 65520.0) return std::copysign(std::numeric_limits<double>::infinity(), x);
  int exponent = magnitude >= 0x1p-14 ? std::ilogb(magnitude) : -14;
  double step = std::ldexp(1.0, exponent - 10);
  return std::copysign(std::nearbyint(magnitude / step) * step, x);  // nearbyint: ties to even
}

// |x - back(x)| <= max(|x| * 2^-11, 2^-25), the bound the header states.
bool within_bound(float x, float back) {
  double bound = std::max(std::fabs(double(x)) * kFloat16RelativeError, kFloat16AbsoluteError);
  return std::fabs(double(x) - double(back)) <= bound;
}

// Random floats with |x| in [2^min_exponent, 2^(max_exponent + 1)), every exponent in the
// range equally likely, random mantissa bits and sign.
std::vector<float> random_floats(std::mt19937& rng, int min_exponent, int max_exponent, std::size_t count) {
  std::uniform_int_distribution<int> exponent(min_exponent, max_exponent);
  std::uniform_int_distribution<uint32_t> mantissa(0, 0x7fffffu);
  std::bernoulli_distribution negative(0.5);
  std::vector<float> values(count);
  for (float& v : values) {
    uint32_t bits = uint32_t(exponent(rng) + 127) << 23 | mantissa(rng);
    v = from_float_bits(bits | (negative(rng) ? 0x80000000u : 0u));
  }
  return values;
}

// Converts `values` in one call each way and counts the values whose round trip exceeds the
// bound (which holds up to 65504) or differs from the reference rounding.
void check_against_bound_and_reference(const std::vector<float>& values) {
  std::vector<uint16_t> halves(values.size());
  std::vector<float> back(values.size());
  float32_to_float16(values.data(), halves.data(), values.size());
  float16_to_float32(halves.data(), back.data(), values.size());
  int outside_bound = 0, not_nearest = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    bool bounded = std::fabs(values[i]) <= 65504.0f;
    if (bounded && !within_bound(values[i], back[i]) && ++outside_bound <= 5)
      BOOST_TEST_MESSAGE(values[i] << " came back as " << back[i] << ", beyond the bound");
    if (double(back[i]) != reference_float16(values[i]) && ++not_nearest <= 5)
      BOOST_TEST_MESSAGE(values[i] << " came back as " << back[i] << ", the reference gives "
                                   << reference_float16(values[i]));
  }
  BOOST_TEST(outside_bound == 0);
  BOOST_TEST(not_nearest == 0);
}

}  // namespace

BOOST_AUTO_TEST_SUITE(float16_wire)

BOOST_AUTO_TEST_CASE(every_float16_widens_exactly_and_narrows_back_to_the_same_bits_and_nans_stay_nan) {
  std::vector<uint16_t> all(65536), back(65536);
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) all[bits] = uint16_t(bits);
  std::vector<float> widened(65536);
  float16_to_float32(all.data(), widened.data(), all.size());
  float32_to_float16(widened.data(), back.data(), widened.size());
  int mismatches = 0;
  for (uint32_t bits = 0; bits <= 0xffffu; ++bits) {
    // core/dtype.hpp's scalar half decodes independently, with branches.
    float expected = float(std::bit_cast<half>(uint16_t(bits)));
    bool ok;
    if (is_nan_half(uint16_t(bits))) {
      ok = std::isnan(widened[bits]) && is_nan_half(back[bits]);
    } else {
      ok = std::bit_cast<uint32_t>(widened[bits]) == std::bit_cast<uint32_t>(expected) && back[bits] == bits;
    }
    if (!ok && ++mismatches <= 5)
      BOOST_TEST_MESSAGE("bits " << bits << " widened to " << widened[bits] << " and came back as " << back[bits]);
  }
  BOOST_TEST(mismatches == 0);
}

BOOST_AUTO_TEST_CASE(random_floats_in_the_normal_range_round_to_nearest_within_the_relative_bound) {
  std::mt19937 rng(20261123);
  check_against_bound_and_reference(random_floats(rng, -14, 15, 200000));
}

BOOST_AUTO_TEST_CASE(random_floats_in_the_subnormal_range_round_to_nearest_within_the_absolute_bound) {
  std::mt19937 rng(11232026);
  // Below 2^-25 everything rounds to zero or to the smallest subnormal; cover it too.
  check_against_bound_and_reference(random_floats(rng, -30, -15, 200000));
}

BOOST_AUTO_TEST_CASE(random_float32_bit_patterns_round_to_the_nearest_float16_or_overflow_to_infinity) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<uint32_t> bits;
  std::vector<float> values;
  while (values.size() < 200000) {
    float v = from_float_bits(bits(rng));
    if (!std::isnan(v)) values.push_back(v);
  }
  std::vector<uint16_t> halves(values.size());
  float32_to_float16(values.data(), halves.data(), values.size());
  int wrong = 0;
  for (std::size_t i = 0; i < values.size(); ++i) {
    double reference = reference_float16(values[i]);
    float got = widen(halves[i]);
    bool same = double(got) == reference && std::signbit(got) == std::signbit(reference);
    if (!same && ++wrong <= 5)
      BOOST_TEST_MESSAGE(values[i] << " became " << got << ", the reference gives " << reference);
  }
  BOOST_TEST(wrong == 0);
}

BOOST_AUTO_TEST_CASE(ties_round_to_even_in_the_normal_and_the_subnormal_range) {
  BOOST_TEST(round_trip(1.0f + 0x1p-11f) == 1.0f);                  // 1.0 is even
  BOOST_TEST(round_trip(1.0f + 3 * 0x1p-11f) == 1.0f + 0x1p-9f);    // 1 + 2^-10 is odd
  BOOST_TEST(round_trip(-(1.0f + 3 * 0x1p-11f)) == -(1.0f + 0x1p-9f));
  BOOST_TEST(round_trip(1.0f + 0x1p-11f + 0x1p-23f) == 1.0f + 0x1p-10f);  // just past the tie
  BOOST_TEST(round_trip(2048.0f + 1.0f) == 2048.0f);
  BOOST_TEST(round_trip(2048.0f + 3.0f) == 2052.0f);
  // A carry out of the mantissa moves to the next exponent: 2 - 2^-11 is a tie between
  // 2 - 2^-10 (odd) and 2.
  BOOST_TEST(round_trip(2.0f - 0x1p-11f) == 2.0f);
  // Subnormals are multiples of 2^-24.
  BOOST_TEST(round_trip(0x1p-25f) == 0.0f);                     // half of the smallest: to 0
  BOOST_TEST(round_trip(3 * 0x1p-25f) == 0x1p-23f);              // 1.5 steps: to 2 steps
  BOOST_TEST(round_trip(5 * 0x1p-25f) == 0x1p-23f);              // 2.5 steps: to 2 steps
  BOOST_TEST(round_trip(0x1p-25f + 0x1p-40f) == 0x1p-24f);      // just past half a step
  BOOST_TEST(round_trip(0x1p-14f - 0x1p-25f) == 0x1p-14f);      // 1023.5 steps: to the smallest normal
  BOOST_TEST(narrow(0x1p-14f - 0x1p-25f) == 0x0400u);
}

BOOST_AUTO_TEST_CASE(the_largest_float16_stays_and_larger_magnitudes_become_infinity_with_their_sign) {
  const float inf = std::numeric_limits<float>::infinity();
  BOOST_TEST(narrow(65504.0f) == 0x7bffu);
  BOOST_TEST(narrow(-65504.0f) == 0xfbffu);
  BOOST_TEST(round_trip(65519.996f) == 65504.0f);  // just below the tie with 65536
  BOOST_TEST(narrow(65520.0f) == 0x7c00u);         // the tie goes to even, beyond the range
  BOOST_TEST(narrow(-65520.0f) == 0xfc00u);
  BOOST_TEST(narrow(1e6f) == 0x7c00u);
  BOOST_TEST(narrow(std::numeric_limits<float>::max()) == 0x7c00u);
  BOOST_TEST(narrow(-std::numeric_limits<float>::max()) == 0xfc00u);
  BOOST_TEST(narrow(inf) == 0x7c00u);
  BOOST_TEST(narrow(-inf) == 0xfc00u);
  BOOST_TEST(widen(0x7c00u) == inf);
  BOOST_TEST(widen(0xfc00u) == -inf);
}

BOOST_AUTO_TEST_CASE(zeros_keep_their_sign_and_nan_becomes_a_quiet_float16_nan) {
  BOOST_TEST(narrow(0.0f) == 0x0000u);
  BOOST_TEST(narrow(-0.0f) == 0x8000u);
  BOOST_TEST(std::signbit(widen(0x8000u)));
  BOOST_TEST(widen(0x8000u) == 0.0f);
  const float quiet = std::numeric_limits<float>::quiet_NaN();
  const float signaling = std::numeric_limits<float>::signaling_NaN();
  // A NaN whose payload lies only in the 13 dropped bits must not become infinity.
  const float low_payload = from_float_bits(0x7f800001u);
  for (float nan : {quiet, -quiet, signaling, low_payload, -low_payload}) {
    uint16_t h = narrow(nan);
    BOOST_TEST(is_quiet_nan_half(h), "float bits " << std::bit_cast<uint32_t>(nan) << " became " << h);
    BOOST_TEST(std::signbit(nan) == bool(h & 0x8000u));
    BOOST_TEST(std::isnan(widen(h)));
  }
}

BOOST_AUTO_TEST_CASE(float32_subnormals_become_zero_with_their_sign) {
  for (uint32_t mantissa : {0x000001u, 0x000abcu, 0x400000u, 0x7fffffu}) {
    BOOST_TEST(narrow(from_float_bits(mantissa)) == 0x0000u, mantissa);
    BOOST_TEST(narrow(from_float_bits(0x80000000u | mantissa)) == 0x8000u, mantissa);
  }
}

BOOST_AUTO_TEST_CASE(converting_many_at_once_matches_converting_one_at_a_time_for_every_length_up_to_40) {
  std::mt19937 rng(40);
  std::vector<float> values = random_floats(rng, -26, 16, 40);
  values[3] = std::numeric_limits<float>::quiet_NaN();
  values[17] = -std::numeric_limits<float>::infinity();
  for (std::size_t n = 0; n <= values.size(); ++n) {
    // One past the end holds a marker that a conversion of n elements must leave alone.
    std::vector<uint16_t> halves(n + 1, 0x1234u);
    float32_to_float16(values.data(), halves.data(), n);
    std::vector<float> back(n + 1, 42.0f);
    float16_to_float32(halves.data(), back.data(), n);
    for (std::size_t i = 0; i < n; ++i) {
      BOOST_TEST(halves[i] == narrow(values[i]), "n " << n << " element " << i);
      BOOST_TEST(std::bit_cast<uint32_t>(back[i]) == std::bit_cast<uint32_t>(widen(halves[i])),
                 "n " << n << " element " << i);
    }
    BOOST_TEST(halves[n] == 0x1234u);
    BOOST_TEST(back[n] == 42.0f);
  }
}

BOOST_AUTO_TEST_SUITE_END()
