#include "actors/executor/node_kind.hpp"

#include "core/error.hpp"

namespace troupe {

NodeKind kind_of(const Graph& graph, const Node& node) {
  const OpDef& def = *node.op_def;
  if (def.fires_on_first_live_input) {
    for (int i = 0; i < int(node.inputs.size()); ++i)
      if (is_back_edge(graph, node, i)) return NodeKind::loop_merge;
    return NodeKind::merge;
  }
  const std::string& op = node.op;
  if (op == "Enter")
    return get_attr_or<bool>(node.attrs, "is_constant", false) ? NodeKind::loop_invariant : NodeKind::enter;
  if (op == "Exit") return NodeKind::exit;
  if (op == "NextIteration") return NodeKind::next_iteration;
  if (op == "StackPush") return NodeKind::stack_push;
  if (op == "StackPop") return NodeKind::stack_pop;
  if (op == "_Send") return NodeKind::send;
  if (op == "_Recv") return NodeKind::recv;
  if (def.variable_op) return NodeKind::variable;
  if (def.queue_op) return NodeKind::queue;
  if (def.frame_op) fail(ErrorCode::internal, "{}: a frame op the executor does not know", node.describe());
  return NodeKind::kernel;
}

VariableOp variable_op_of(const Node& node) {
  const std::string& op = node.op;
  if (op == "VariableV2") return VariableOp::read;
  if (op == "Assign") return VariableOp::assign;
  if (op == "AssignAdd") return VariableOp::assign_add;
  if (op == "AssignSub") return VariableOp::assign_sub;
  if (op == "ApplyGradient") return VariableOp::apply_gradient;
  if (op == "SparseApplyGradient") return VariableOp::sparse_apply_gradient;
  if (op == "AccumulateGradient") return VariableOp::accumulate_gradient;
  if (op == "SyncReplicasStep") return VariableOp::sync_step;
  if (op == "SyncReplicasStop") return VariableOp::sync_stop;
  if (op == "SyncReplicasAggregate") return VariableOp::sync_aggregate;
  fail(ErrorCode::internal, "{}: not a variable op the executor knows", node.describe());
}

QueueOp queue_op_of(const Node& node) {
  const std::string& op = node.op;
  if (op == "QueueEnqueue") return QueueOp::enqueue;
  if (op == "QueueEnqueueMany") return QueueOp::enqueue_many;
  if (op == "QueueDequeue") return QueueOp::dequeue;
  if (op == "QueueDequeueMany") return QueueOp::dequeue_many;
  if (op == "QueueClose") return QueueOp::close;
  if (op == "QueueSize") return QueueOp::size;
  fail(ErrorCode::internal, "{}: not a queue op the executor knows", node.describe());
}

}  // namespace troupe
