#include "core/dtype.hpp"

#include <cstring>

namespace troupe {

half::half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exponent = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t mantissa = x & 0x7fffffu;
  if (((x >> 23) & 0xff) == 0xff) {  // inf or nan
    bits = uint16_t(sign | 0x7c00u | (mantissa ? 0x200u : 0u));
  } else if (exponent >= 31) {
    bits = uint16_t(sign | 0x7c00u);
  } else if (exponent <= 0) {
    if (exponent < -10) {
      bits = uint16_t(sign);
    } else {
      mantissa |= 0x800000u;
      uint32_t shift = uint32_t(14 - exponent);
      uint32_t value = mantissa >> shift;
      uint32_t rest = mantissa & ((1u << shift) - 1);
      uint32_t halfway = 1u << (shift - 1);
      if (rest > halfway || (rest == halfway && (value & 1))) ++value;
      bits = uint16_t(sign | value);
    }
  } else {
    uint32_t value = (uint32_t(exponent) << 10) | (mantissa >> 13);
    uint32_t rest = mantissa & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (value & 1))) ++value;  // may carry into exponent
    bits = uint16_t(sign | value);
  }
}

half::operator float() const {
  uint32_t sign = uint32_t(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  uint32_t x;
  if (exponent == 0) {
    if (mantissa == 0) {
      x = sign;
    } else {
      exponent = 127 - 15 + 1;
      while (!(mantissa & 0x400u)) {
        mantissa <<= 1;
        --exponent;
      }
      mantissa &= 0x3ffu;
      x = sign | (exponent << 23) | (mantissa << 13);
    }
  } else if (exponent == 31) {
    x = sign | 0x7f800000u | (mantissa << 13);
  } else {
    x = sign | ((exponent - 15 + 127) << 23) | (mantissa << 13);
  }
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

const char* name_of(DType dtype) {
  switch (dtype) {
    case DType::float32: return "float32";
    case DType::float16: return "float16";
    case DType::float64: return "float64";
    case DType::int32: return "int32";
    case DType::int64: return "int64";
    case DType::uint8: return "uint8";
    case DType::boolean: return "bool";
    case DType::invalid: break;
  }
  return "invalid";
}

DType dtype_from_name(const std::string& name) {
  for (auto d : {DType::float32, DType::float16, DType::float64, DType::int32, DType::int64,
                 DType::uint8, DType::boolean})
    if (name == name_of(d)) return d;
  fail(ErrorCode::invalid_argument, "unknown dtype '{}'", name);
}

bool is_floating(DType d) {
  return d == DType::float32 || d == DType::float16 || d == DType::float64;
}

bool is_integer(DType d) {
  return d == DType::int32 || d == DType::int64 || d == DType::uint8;
}

}  // namespace troupe
