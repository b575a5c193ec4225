#pragma once
// Ops that fit a gradient to the run-time shape of another tensor; gradient functions use
// them where static shapes may be partly unknown.
#include <optional>
#include <vector>

#include "graph/scope.hpp"

namespace troupe::ops {

// Sums `grad` over the dimensions along which `like` was broadcast to grad's shape.
Output sum_to_shape_of(const Scope& scope, Output grad, Output like);
// `grad` has the shape of a reduction of `like` over axes (keep_dims or not); spreads it back
// over like's shape, divided by the number of elements reduced if `mean`.
Output reduction_grad(const Scope& scope, Output grad, Output like,
                      std::optional<std::vector<int64_t>> axes, bool mean);
// `x` under the shape of `like` (same number of elements).
Output reshape_like(const Scope& scope, Output x, Output like);

// Fits a gradient to x: unchanged when the static shapes already agree.
Output fit_gradient(const Scope& scope, Output grad, Output x);

}  // namespace troupe::ops
