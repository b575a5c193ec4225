#pragma once
// QueueNode (NodeKind::queue): a queue op (ops/data/queue.hpp), which has no kernel: the queue
// actor of the process's Runtime (actors/state/queue_actor.hpp) does the work.
// Takes: every data input of a tag and every control input, or the start signal of a source
//   node; and the down message of its queue actor, which it monitors.
// Sends: per tag, one request to the queue, the one StatePlan::queue_op names (an enqueue, a
//   dequeue, a close, a size), and what the queue replies to each consumer with the tag. The
//   queue answers when it can (a dequeue waits there for elements); meanwhile this actor
//   handles other tags. A dead input sends dead outputs and asks nothing. A queue's error goes
//   to the step actor; the reply of an aborted step is dropped, and a request the queue still
//   holds for it is withdrawn (cancel_atom). A queue that dies holding requests of this node
//   answers none of them, so each step that waits for one fails naming the node and the queue.
// Per tag: the inputs so far, in a Pending slot, freed when the request is sent. Per step: the
//   requests the queue has not answered yet, freed by the last answer or the step's abort.
#include <map>

#include "actors/executor/node.hpp"

namespace troupe {

class QueueNode final : public NodeActor {
 public:
  using NodeActor::NodeActor;
  caf::behavior make_behavior() override;
  void on_exit() override;

 private:
  void fire(const Tag& tag, Tensor* inputs, bool dead) override;
  void drop_step(uint64_t step) override;
  void add_waits(std::vector<WaitReport>& out) const override;
  void request_from_queue(const Tag& tag, Tensor* inputs);
  void on_queue_down(const caf::down_msg& down);

  std::map<uint64_t, int> requests_;  // per step: requests the queue has not answered yet
  const StatePlan* state_ = &plan_->state_of(*me_);  // its stack, queue or shard
};

}  // namespace troupe
