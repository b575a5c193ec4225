#pragma once
// Variables: state that lives in a parameter-shard actor and outlives steps. A Variable node
// reads the current value; Assign, AssignAdd and AssignSub change it and output the new value.
// None has a kernel: the node actor turns each into a message to the shard that owns the
// variable (actors/param_shard.hpp), which applies it in place.
#include "graph/scope.hpp"

namespace troupe::ops {

struct VariableOptions {
  std::string shared_name;  // the name in the shard; defaults to the node's name
  bool trainable = true;    // included in Optimizer::minimize's default variables
};
Output variable(const Scope& scope, PartialShape shape, DType dtype, VariableOptions options = {});
// Another read of the variable: a node of its own, so that control dependencies of `scope`
// order it (e.g. after an assign). The Variable node itself reads whenever its step starts it.
Output read_variable(const Scope& scope, Output variable);
// `variable` must be the output of a Variable node.
Output assign(const Scope& scope, Output variable, Output value, bool validate_shape = true);
Output assign_add(const Scope& scope, Output variable, Output delta);
Output assign_sub(const Scope& scope, Output variable, Output delta);

}  // namespace troupe::ops

namespace troupe {

// The name a variable op's variable has in its shard: attr "shared_name", else the node's name.
const std::string& variable_name(const Node& node);

enum class VariableUpdate { assign, add, sub };
VariableUpdate variable_update_of(const std::string& op);
// value += delta or value -= delta, elementwise, same dtype and shape; in place.
void apply_variable_update(Tensor& value, const Tensor& delta, VariableUpdate update);

}  // namespace troupe
