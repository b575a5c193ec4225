#pragma once
// The tensors test/core/checkpoint_saver_child.cpp saves at each global step, derived from the
// step so that a restored checkpoint can be checked against the step its index names.
#include <cstdint>
#include <vector>

#include "core/checkpoint.hpp"

namespace troupe::testing {

inline Tensor saver_a(int64_t step) {  // int64[256,1024], 2 MiB
  Tensor t(DType::int64, Shape{256, 1024});
  int64_t* p = t.data<int64_t>();
  for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = step * 1000003 + i;
  return t;
}

inline Tensor saver_b(int64_t step) {  // float32[512,512], 1 MiB, saved as two row slices
  Tensor t(DType::float32, Shape{512, 512});
  float* p = t.data<float>();
  for (int64_t i = 0; i < t.num_elements(); ++i) p[i] = float(step % 4096) + float(i % 4096) * 0.5f;
  return t;
}

}  // namespace troupe::testing
