#pragma once
// Variables: state that lives in a parameter-shard actor and outlives steps. A Variable node
// reads the current value; Assign, AssignAdd and AssignSub change it and output the new value.
// None has a kernel: the node actor turns each into a message to the shard that owns the
// variable (actors/state/param_shard.hpp), which applies it in place.
#include <optional>
#include <string>
#include <vector>

#include "graph/scope.hpp"

namespace troupe::ops {

struct VariableOptions {
  std::string shared_name;  // the name in the shard; defaults to the node's name
  bool trainable = true;    // included in Optimizer::minimize's default variables
};
Output variable(const Scope& scope, PartialShape shape, DType dtype, VariableOptions options = {});
// A variable with an initial value, as tf.Variable(initial_value): its dtype and shape are the
// value's, and an Assign of the value ("<name>/initializer") is recorded as its initializer,
// which global_variables_initializer() and variables_initializer() run.
Output variable(const Scope& scope, Output initial_value, VariableOptions options = {});
// Every variable of the graph once, by shared name, in the order the graph first defines them
// (a read of a variable is a VariableV2 node of its own): the node that carries the
// initializer where one does (TensorFlow's tf.compat.v1.global_variables).
std::vector<Output> global_variables(const Graph& graph);
// Records `init` (an op that sets the variable, typically an Assign) as the variable's initializer.
void set_initializer(Output variable, Output init);
// The variable's recorded initializer, or nullptr.
Node* initializer_of(const Graph& graph, const Output& variable);
// One target that runs the initializers of every variable of the graph (TensorFlow's
// tf.compat.v1.global_variables_initializer); a variable without a recorded initializer is
// refused, naming it, rather than left for a later step to find uninitialised.
Node* global_variables_initializer(const Scope& scope);
// The same for the given variables only.
Node* variables_initializer(const Scope& scope, const std::vector<Output>& variables);
// Another read of the variable: a node of its own, so that control dependencies of `scope`
// order it (e.g. after an assign). The Variable node itself reads whenever its step starts it.
Output read_variable(const Scope& scope, Output variable);
// `variable` must be the output of a Variable node.
Output assign(const Scope& scope, Output variable, Output value, bool validate_shape = true);
Output assign_add(const Scope& scope, Output variable, Output delta);
Output assign_sub(const Scope& scope, Output variable, Output delta);

// A variable split by rows over num_parts variables (TensorFlow's partitioned variables), so
// that its parts live on several parameter shards (SessionOptions::num_param_shards, or the ps
// tasks of a cluster through replica_device_setter). Part k is the variable
// "<prefix><name>/part_<k>" holding consecutive rows of the whole: rows / num_parts each, the
// first rows % num_parts parts one more; it is initialised from those rows of `initial_value`.
// A checkpoint saves the parts as slices of one variable "<prefix><name>", so it restores into
// any other split of it, or into an unsplit variable of that name, and the reverse
// (actors/state/saver.hpp). ops::embedding_lookup (ops/state/embedding.hpp) reads rows of it where
// the parts live, and an optimizer updates only the rows a step touched.
struct PartitionedVariable {
  std::vector<Output> parts;
  Output value;  // the whole: the parts concatenated along the rows
};
PartitionedVariable partitioned_variable(const Scope& scope, const std::string& name, Output initial_value,
                                         int num_parts, VariableOptions options = {});

}  // namespace troupe::ops

namespace troupe {

// variable_name(node), the name a variable op's variable has in its shard, is in graph/graph.hpp
// (placement colocates a variable's ops by it).

// Where a part of a partitioned variable lies in the whole, read from its Variable node's
// attributes; nullopt for an unsplit variable.
struct VariablePartition {
  std::string full_name;
  Shape full_shape;
  int64_t row_begin = 0;
};
std::optional<VariablePartition> partition_of(const Node& variable);

enum class VariableUpdate { assign, add, sub };
VariableUpdate variable_update_of(const std::string& op);
// value += delta or value -= delta, elementwise, same dtype and shape; in place.
void apply_variable_update(Tensor& value, const Tensor& delta, VariableUpdate update);

}  // namespace troupe
