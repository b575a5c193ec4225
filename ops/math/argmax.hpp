#pragma once
#include "graph/scope.hpp"

namespace troupe::ops {

// Index (int64) of the largest element along `axis`; the first one on ties.
Output argmax(const Scope& scope, Output x, int64_t axis);
// The fraction (float32 scalar) of rows whose argmax over the last axis of `logits` equals the
// label (int32 or int64 class indices).
Output accuracy(const Scope& scope, Output logits, Output labels);

}  // namespace troupe::ops
