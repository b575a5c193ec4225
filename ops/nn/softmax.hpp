#pragma once
// Softmax and LogSoftmax over the last axis, and the two cross-entropy losses on logits.
#include "graph/scope.hpp"

namespace troupe::ops {

Output softmax(const Scope& scope, Output logits);
Output log_softmax(const Scope& scope, Output logits);

// Per-example loss -log softmax(logits)[label], logits [N,C], labels [N] of int32 or int64
// class indices. A label outside [0, C) fails the step naming the row.
Output sparse_softmax_cross_entropy_with_logits(const Scope& scope, Output logits, Output labels);
// Per-example loss -sum(labels * log softmax(logits)), logits and labels [N,C].
Output softmax_cross_entropy_with_logits(const Scope& scope, Output logits, Output labels);

}  // namespace troupe::ops
