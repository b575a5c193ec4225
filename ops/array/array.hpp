#pragma once
// Reshape, Transpose, Cast, Fill, ZerosLike, OnesLike.
#include <vector>

#include "graph/scope.hpp"

namespace troupe::ops {

// One dimension may be -1: it is inferred from the number of elements.
Output reshape(const Scope& scope, Output x, std::vector<int64_t> shape);
// perm[i] is the input dimension that becomes output dimension i; empty reverses them.
Output transpose(const Scope& scope, Output x, std::vector<int64_t> perm = {});
Output cast(const Scope& scope, Output x, DType dtype);
// A tensor of `shape` with every element the scalar `value`.
Output fill(const Scope& scope, Shape shape, Output value);
Output zeros_like(const Scope& scope, Output x);
Output ones_like(const Scope& scope, Output x);

}  // namespace troupe::ops
