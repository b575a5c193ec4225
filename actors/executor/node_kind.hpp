#pragma once
// The actor kind of a node: how its actor treats the messages of a tag (docs/architecture.md,
// "The message that flows"). Chosen once, when the executable's plan is built, together with
// the request a variable or queue op makes, so that no actor compares op names while it fires.
// Each kind is a class of its own under actors/executor/ (spawn_node.hpp picks it).
#include "graph/graph.hpp"

namespace troupe {

enum class NodeKind {
  kernel,          // waits for every input of a tag, runs the kernel (Switch too: dead outputs)
  variable,        // waits for every input of a tag, asks the variable's parameter shard
  queue,           // waits for every input of a tag, asks a queue actor (ops/data/queue.hpp)
  merge,           // a cond's Merge: the first live input of a tag
  loop_merge,      // a loop's Merge: one input per tag (Enter at iteration 0, then NextIteration)
  enter,           // into iteration 0 of the child frame
  loop_invariant,  // a constant Enter: into every iteration of the child frame
  exit,            // back to the parent frame when the loop ends
  next_iteration,  // on to the next iteration, at most parallel_iterations ahead
  stack_push,      // saves a forward loop's value of each iteration
  stack_pop,       // hands them to the gradient loop, last first
  send,            // the producer's side of an edge between two devices
  recv,            // the consumer's side of it
};

NodeKind kind_of(const Graph& graph, const Node& node);

// The kinds of a while loop's own nodes, which read a LoopPlan (executable.hpp).
inline bool is_loop_kind(NodeKind kind) {
  return kind == NodeKind::loop_merge || kind == NodeKind::enter || kind == NodeKind::loop_invariant ||
         kind == NodeKind::exit || kind == NodeKind::next_iteration;
}

// What a variable op asks its shard (actors/state/param_shard.hpp).
enum class VariableOp {
  read, assign, assign_add, assign_sub, apply_gradient, sparse_apply_gradient, accumulate_gradient, sync_step, sync_stop,
  sync_aggregate
};
VariableOp variable_op_of(const Node& node);  // node's op must be a variable op

// What a queue op asks its queue (actors/state/queue_actor.hpp).
enum class QueueOp { enqueue, enqueue_many, dequeue, dequeue_many, close, size };
QueueOp queue_op_of(const Node& node);  // node's op must be a queue op

}  // namespace troupe
