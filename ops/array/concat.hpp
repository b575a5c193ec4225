#pragma once
// Concat and Split along an axis (inception blocks join their branches with Concat).
#include <vector>

#include "graph/scope.hpp"

namespace troupe::ops {

Output concat(const Scope& scope, const std::vector<Output>& inputs, int64_t axis);
// num_split equal parts along axis; the dimension must divide evenly.
std::vector<Output> split(const Scope& scope, Output x, int64_t axis, int64_t num_split);

}  // namespace troupe::ops
