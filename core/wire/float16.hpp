#pragma once
// The lossy float16 form of float32 tensors sent between processes (TensorFlow whitepaper
// §5.5): the sender converts float32 to IEEE 754 binary16, the receiver converts back.
//
// float32_to_float16 rounds to nearest, ties to even, at every magnitude: float16 normals
// (2^-14 <= |x| <= 65504) keep 11 significant bits, float16 subnormals are multiples of 2^-24,
// and float32 subnormals become zero. |x| >= 65520 (beyond the float16 range after rounding)
// and +-inf become +-inf; NaN becomes a quiet float16 NaN; the sign is kept everywhere, zero
// included. float16_to_float32 is exact (every float16 is a float32), NaN payloads included.
//
// For a finite x with |x| <= 65504, the round trip
// back(x) = float16_to_float32(float32_to_float16(x)) guarantees
// |x - back(x)| <= max(|x| * kFloat16RelativeError, kFloat16AbsoluteError): half a float16 ulp,
// at most 2^-11 relative in the normal range and 2^-25 absolute in the subnormal range.
//
// Both loops are branch-free per element so that the compiler vectorizes them (GCC does at
// the project's -O3). float32_to_float16 rounds subnormals with a float addition and so
// assumes the default floating-point environment (round to nearest).
#include <cstddef>
#include <cstdint>

namespace troupe {

inline constexpr double kFloat16RelativeError = 1.0 / 2048;      // 2^-11
inline constexpr double kFloat16AbsoluteError = 1.0 / 33554432;  // 2^-25

// in and out hold n elements each and do not overlap.
void float32_to_float16(const float* in, uint16_t* out, std::size_t n);
void float16_to_float32(const uint16_t* in, float* out, std::size_t n);

}  // namespace troupe
