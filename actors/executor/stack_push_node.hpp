#pragma once
// StackPushNode (NodeKind::stack_push): saves the value of each iteration of a forward loop
// for its gradient (ops/control/while_loop.cpp); no kernel.
// Takes: slot 0, the value of an iteration (dead ones too). Control inputs are ignored.
// Sends: a control signal with the tag to its control outputs (the loop's iteration gate),
//   once the value is in the executable's StackStore under the step, the stack and the
//   iterations of every frame the push ran in. It has no data outputs.
// Per tag: nothing; the StackStore keeps the value until a StackPop takes it or the step ends.
#include "actors/executor/node.hpp"

namespace troupe {

class StackPushNode final : public NodeActor {
 public:
  using NodeActor::NodeActor;

 private:
  void on_input(const Tag& tag, uint32_t slot, Value& value) override;
  const StatePlan* state_ = &plan_->state_of(*me_);  // its stack, queue or shard
};

}  // namespace troupe
