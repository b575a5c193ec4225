#pragma once
// LoopMergeNode (NodeKind::loop_merge): a while loop's Merge (ops/control/while_loop.cpp),
// which has no kernel.
// Takes: one data input per tag: the Enter's at iteration 0, the NextIteration's after that.
//   Control inputs are ignored.
// Sends: the value and its slot's index (output 1, int32) to each consumer with the tag; a dead
//   input (a loop that is not run at all) goes on dead.
// Per tag: nothing.
#include "actors/executor/node.hpp"

namespace troupe {

class LoopMergeNode final : public NodeActor {
 public:
  using NodeActor::NodeActor;

 private:
  void on_input(const Tag& tag, uint32_t slot, Value& value) override;
};

}  // namespace troupe
