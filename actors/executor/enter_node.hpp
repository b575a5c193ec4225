#pragma once
// EnterNode (NodeKind::enter): a while loop's Enter of a loop variable (ops/control/while_loop.cpp),
// which has no kernel.
// Takes: its data input (in the parent frame) and every control input of a tag (control inputs
//   from outside the loop hold the Enter back).
// Sends: the value to each consumer with the tag of iteration 0 of the child frame, which the
//   executable's frame table makes (or finds) for it; dead if any input was dead.
// Per tag: the inputs so far, in a Pending slot (none for an Enter without control inputs),
//   freed when it fires. The frame itself lives in the frame table until every Enter of the
//   loop has entered it and every Exit has left it.
#include "actors/executor/node.hpp"

namespace troupe {

class EnterNode final : public NodeActor {
 public:
  using NodeActor::NodeActor;

 private:
  const LoopPlan* loop_ = &plan_->loop_of(*me_);  // its loop's fields (executable.hpp)
  void fire(const Tag& tag, Tensor* inputs, bool dead) override;
};

}  // namespace troupe
