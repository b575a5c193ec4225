#pragma once
#include <optional>
#include <vector>

#include "graph/scope.hpp"

namespace troupe::ops {

// Reductions over `axes` (negative counts from the end); no axes given: over all of them.
Output sum(const Scope& scope, Output x, std::optional<std::vector<int64_t>> axes = {}, bool keep_dims = false);
Output mean(const Scope& scope, Output x, std::optional<std::vector<int64_t>> axes = {}, bool keep_dims = false);
Output max(const Scope& scope, Output x, std::optional<std::vector<int64_t>> axes = {}, bool keep_dims = false);

}  // namespace troupe::ops
