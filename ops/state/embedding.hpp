#pragma once
// Embeddings: rows of a (partitioned) variable read where they live, and sparse updates.
//
//   auto table = ops::partitioned_variable(s, "emb", initial, Partitioner{.max_part_bytes = 64 << 20});
//   auto rows = ops::embedding_lookup(s, table, ids);      // ids: int32/int64 of any shape
//   ...                                                    // rows: ids.shape + [dim]
//   Optimizer::momentum(0.01, 0.9).minimize(s, loss);      // updates only the rows looked up
//
// embedding_lookup gathers each part's rows on the part's device (with replica_device_setter,
// its ps task), so only the rows a step needs cross to the worker, never the table. Ids go to
// the part holding their row (TensorFlow's "div" strategy: part k holds consecutive rows).
// Optimizer::minimize sees a variable read only through gathers and applies its gradient as
// one SparseApplyGradient per variable: the rows touched (a row looked up twice gets the sum
// of its gradients) and, for optimizers with slots, those rows of the slots; the other rows
// and their slots do not change (TensorFlow's sparse apply_* ops; Adam's step count is the
// variable's, as in tf.compat.v1.train.AdamOptimizer). The shard's message carries the rows
// and their gradients, not the table.
#include <cstdint>

#include "graph/scope.hpp"
#include "ops/state/variable.hpp"

namespace troupe::ops {

// Rows of params along its first dimension: output[i...] = params[indices[i...]], shape
// indices.shape + params.shape[1:] (tf.gather on axis 0). Indices are int32 or int64; one
// outside [0, rows) fails the step naming it. Its gradient for params is dense (the rows'
// gradients added into zeros shaped like params); an optimizer of a variable read only
// through gathers applies them sparsely instead (above).
Output gather(const Scope& scope, Output params, Output indices);

// Rows of `params` (a variable) for `ids`, gathered where the variable lives.
Output embedding_lookup(const Scope& scope, Output params, Output ids);
// Rows of the partitioned variable for `ids`: each part gathers its own ids' rows on its
// device, and the worker stitches them back in the ids' order. An id outside the whole
// table's rows fails the step naming it.
Output embedding_lookup(const Scope& scope, const PartitionedVariable& params, Output ids);

// How many row parts a variable is split into, so that no part holds more than
// max_part_bytes (TensorFlow's variable_axis_size_partitioner): ceil(bytes / max_part_bytes),
// at most max_parts (0: no limit; typically the number of ps tasks) and at most the rows.
struct Partitioner {
  int64_t max_part_bytes = int64_t(64) << 20;
  int max_parts = 0;
  int parts_for(const Shape& shape, DType dtype) const;
};
// partitioned_variable with as many parts as the partitioner asks for the initial value.
PartitionedVariable partitioned_variable(const Scope& scope, const std::string& name, Output initial_value,
                                         const Partitioner& partitioner, VariableOptions options = {});

}  // namespace troupe::ops
