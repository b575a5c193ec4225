#pragma once
#include "core/error.hpp"

namespace troupe {

template <class F>
decltype(auto) visit_dtype(DType dtype, F&& f) {
  switch (dtype) {
    case DType::float32: return f(float{});
    case DType::float16: return f(half{});
    case DType::float64: return f(double{});
    case DType::int32: return f(int32_t{});
    case DType::int64: return f(int64_t{});
    case DType::uint8: return f(uint8_t{});
    case DType::boolean: return f(bool{});
    case DType::invalid: break;
  }
  fail(ErrorCode::invalid_argument, "invalid dtype {}", int(dtype));
}

}  // namespace troupe
