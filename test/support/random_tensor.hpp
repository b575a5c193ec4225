#pragma once
// Tensors of every dtype filled with random values, for round-trip tests (wire format,
// checkpoints).
#include <cstdint>
#include <random>
#include <tuple>
#include <type_traits>

#include "core/tensor.hpp"

namespace troupe::testing {

using AllTypes = std::tuple<float, half, double, int32_t, int64_t, uint8_t, bool>;

template <class T>
Tensor random_tensor(Shape shape, std::mt19937& rng) {
  Tensor t(dtype_v<T>, shape);
  T* p = t.data<T>();
  std::uniform_real_distribution<double> real(-1e3, 1e3);
  for (int64_t i = 0; i < t.num_elements(); ++i) {
    if constexpr (std::is_same_v<T, bool>) p[i] = rng() & 1;
    else if constexpr (std::is_same_v<T, half>) p[i] = half(float(real(rng)));
    else if constexpr (std::is_floating_point_v<T>) p[i] = T(real(rng));
    else p[i] = T(rng());
  }
  return t;
}

}  // namespace troupe::testing
