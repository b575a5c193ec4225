#pragma once
// Concat and Split along an axis (inception blocks join their branches with Concat).
#include <vector>

#include "graph/scope.hpp"

namespace troupe::ops {

Output concat(const Scope& scope, const std::vector<Output>& inputs, int64_t axis);
// num_split equal parts along axis; the dimension must divide evenly.
std::vector<Output> split(const Scope& scope, Output x, int64_t axis, int64_t num_split);
// Parts of the given sizes along axis (TensorFlow's SplitV); they must add up to the dimension.
std::vector<Output> split(const Scope& scope, Output x, int64_t axis, std::vector<int64_t> sizes);

}  // namespace troupe::ops
