#pragma once
#include "graph/scope.hpp"

namespace troupe::ops {

struct MatMulOptions {
  bool transpose_a = false;
  bool transpose_b = false;
};
// [m,k] x [k,n] -> [m,n] (after the optional transposes). float32/float64 through OpenBLAS.
Output matmul(const Scope& scope, Output a, Output b, MatMulOptions options = {});

}  // namespace troupe::ops
