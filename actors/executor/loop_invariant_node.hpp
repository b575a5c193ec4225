#pragma once
// LoopInvariantNode (NodeKind::loop_invariant): a constant Enter (ops/control/while_loop.cpp),
// which hands a value from outside a while loop to every iteration of it; no kernel. Where the
// loop's first Merge is in the same partition, that Merge serves the value instead
// (LoopPlan::hosted, loop_merge_node.hpp) and this actor gets nothing; what follows is the
// invariant whose Merge is on another device.
// Takes: slot 0, the value, in the parent frame; a control input per iteration of the child
//   frame, which has started (from the loop's first Merge); slot 1, the loop's LoopCond when
//   false or dead, which marks the frame's last iteration (a live true is not sent to it:
//   Target::drop_true).
// Sends: the value (dead if it arrived dead) to each consumer with the tag of each iteration as
//   it starts, or as soon as the value arrives for iterations that started before it.
// Per frame (step, frame id): the value, how many iterations have had it, the iterations
//   waiting for it and the last iteration once known; freed once every iteration has had it.
#include "actors/executor/invariant_server.hpp"
#include "actors/executor/node.hpp"
#include "actors/executor/per_frame.hpp"

namespace troupe {

// What a loop invariant's state for one frame waits for, as a wait report under the
// invariant's name: its value, or, once that has come, the loop's last iteration (`served`:
// the iterations given the value so far). Whoever keeps the state (this node, or the loop's
// Merge that serves it: loop_merge_node.hpp) reports the same.
WaitReport invariant_wait(const NodePlan& invariant, const FrameKey& frame, int64_t served, bool arrived);

class LoopInvariantNode final : public NodeActor {
 public:
  using NodeActor::NodeActor;

 private:
  const LoopPlan* loop_ = &plan_->loop_of(*me_);  // its loop's fields (executable.hpp)
  void on_input(const Tag& tag, uint32_t slot, Value& value) override;
  void drop_step(uint64_t step) override { erase_step(invariants_, step); }
  void add_waits(std::vector<WaitReport>& out) const override;
  PerFrame<InvariantServer>::iterator served_for(const FrameKey& key);
  void forget_if_over(PerFrame<InvariantServer>::iterator it);

  PerFrame<InvariantServer> invariants_;  // one value each
};

}  // namespace troupe
