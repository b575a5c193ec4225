#pragma once
// Element types of tensors, their sizes and names, and the mapping from C++ types.
#include <cstddef>
#include <cstdint>
#include <ostream>
#include <string>

namespace troupe {

enum class DType : uint8_t { invalid = 0, float32, float16, float64, int32, int64, uint8, boolean };

// IEEE 754 binary16, stored as its bits; converted to and from float for arithmetic.
struct half {
  uint16_t bits = 0;
  half() = default;
  explicit half(float f);
  explicit operator float() const;
  friend bool operator==(half a, half b) { return float(a) == float(b); }
};

// In line: every tensor's byte size asks it (on the path of every firing).
constexpr std::size_t size_of(DType dtype) {
  switch (dtype) {
    case DType::float32: return 4;
    case DType::float16: return 2;
    case DType::float64: return 8;
    case DType::int32: return 4;
    case DType::int64: return 8;
    case DType::uint8: return 1;
    case DType::boolean: return 1;
    case DType::invalid: break;
  }
  return 0;
}
const char* name_of(DType dtype);
DType dtype_from_name(const std::string& name);  // throws on an unknown name
bool is_floating(DType dtype);
inline std::ostream& operator<<(std::ostream& out, DType d) { return out << name_of(d); }
bool is_integer(DType dtype);

template <class T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::float32; };
template <> struct dtype_of<half> { static constexpr DType value = DType::float16; };
template <> struct dtype_of<double> { static constexpr DType value = DType::float64; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::int64; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::uint8; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::boolean; };
template <class T> inline constexpr DType dtype_v = dtype_of<T>::value;

// Calls f(T{}) with the C++ type of dtype. Throws for invalid.
template <class F>
decltype(auto) visit_dtype(DType dtype, F&& f);

}  // namespace troupe

#include "core/dtype_visit.hpp"
