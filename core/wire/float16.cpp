#include "core/wire/float16.hpp"

#include <bit>

namespace troupe {

namespace {

// float32 fields: sign 1, exponent 8 (bias 127), mantissa 23. float16: 1, 5 (bias 15), 10.
constexpr uint32_t kSignBit = 0x80000000u;
constexpr uint32_t kFloatInf = 0x7f800000u;
constexpr uint32_t kHalfInf = 0x7c00u;
constexpr uint32_t kHalfQuietNan = 0x7e00u;
// The float32 bits of 2^-14, the smallest float16 normal.
constexpr uint32_t kSmallestHalfNormal = 0x38800000u;
// Subtracting this from float32 bits rebiases the exponent from 127 to 15 (112 = 127 - 15).
constexpr uint32_t kRebias = 112u << 23;
// 0.5f has an ulp of 2^-24, the float16 subnormal step: adding it to |x| < 2^-14 rounds |x| to
// that step (to nearest, ties to even), and the sum's low mantissa bits are the float16 bits.
constexpr float kSubnormalMagic = 0.5f;

// All ones when `condition` holds, else 0. Selecting with masks instead of ?: keeps the loops
// free of branches: GCC would otherwise move each side's floating-point work under a branch.
uint32_t mask_if(bool condition) { return 0u - uint32_t(condition); }

uint16_t to_half(float value) {
  uint32_t bits = std::bit_cast<uint32_t>(value);
  uint32_t sign = (bits & kSignBit) >> 16;
  uint32_t magnitude = bits & ~kSignBit;

  // Normal range: drop 13 mantissa bits, rounding to nearest even by adding just under half
  // of the dropped unit plus the kept lowest bit. A carry out of the mantissa moves to the
  // next exponent, which is the correct rounding; past 65504 it reaches kHalfInf or above.
  // Below 2^-14 the subtraction wraps; that value is not chosen.
  uint32_t odd = (magnitude >> 13) & 1u;
  uint32_t normal = (magnitude - kRebias + 0xfffu + odd) >> 13;
  normal = normal < kHalfInf ? normal : kHalfInf;

  float rounded = std::bit_cast<float>(magnitude) + kSubnormalMagic;
  uint32_t subnormal = std::bit_cast<uint32_t>(rounded) - std::bit_cast<uint32_t>(kSubnormalMagic);

  // A NaN keeps the top 9 bits of its payload and is made quiet.
  uint32_t nan = kHalfQuietNan | ((magnitude >> 13) & 0x1ffu);

  uint32_t is_subnormal = mask_if(magnitude < kSmallestHalfNormal);
  uint32_t is_nan = mask_if(magnitude > kFloatInf);
  uint32_t finite = (subnormal & is_subnormal) | (normal & ~is_subnormal);
  return uint16_t(sign | (nan & is_nan) | (finite & ~is_nan));
}

float to_float(uint16_t value) {
  uint32_t sign = uint32_t(value & 0x8000u) << 16;
  uint32_t magnitude = value & 0x7fffu;
  // Normals, infinities and NaNs: widen the fields and rebias the exponent (from 15 to 127,
  // or from 31 to 255 for infinities and NaNs).
  uint32_t shifted = (magnitude << 13) + kRebias;
  shifted += kRebias & mask_if(magnitude >= kHalfInf);
  // Subnormals and zero: magnitude * 2^-24, exact as magnitude < 2^10.
  uint32_t subnormal = std::bit_cast<uint32_t>(float(int32_t(magnitude)) * 0x1p-24f);
  uint32_t is_subnormal = mask_if(magnitude < 0x400u);
  return std::bit_cast<float>(sign | (subnormal & is_subnormal) | (shifted & ~is_subnormal));
}

}  // namespace

void float32_to_float16(const float* in, uint16_t* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = to_half(in[i]);
}

void float16_to_float32(const uint16_t* in, float* out, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) out[i] = to_float(in[i]);
}

}  // namespace troupe
