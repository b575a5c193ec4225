#pragma once
// StackPopNode (NodeKind::stack_pop): hands a forward loop's saved values to the loop's
// gradient, last iteration first (ops/control/while_loop.cpp); no kernel.
// Takes: every data input of a tag, the iteration counts of the forward loops being
//   differentiated, innermost first (this loop's, then those of the loops around it), and
//   every control input.
// Sends: the value StackPush saved for the matching forward iteration, as it was saved (dead
//   or live), to each consumer with the tag; dead outputs for a dead input and for the
//   gradient loop's last, dead, iteration. A value that is missing goes to the step actor as
//   an internal error.
// Per tag: the inputs so far, in a Pending slot, freed when it fires; the value leaves the
//   executable's StackStore when popped.
#include "actors/executor/node.hpp"

namespace troupe {

class StackPopNode final : public NodeActor {
 public:
  using NodeActor::NodeActor;

 private:
  void fire(const Tag& tag, Tensor* inputs, bool dead) override;
  const StatePlan* state_ = &plan_->state_of(*me_);  // its stack, queue or shard
};

}  // namespace troupe
