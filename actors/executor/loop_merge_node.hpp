#pragma once
// LoopMergeNode (NodeKind::loop_merge): a while loop's Merge (ops/control/while_loop.cpp),
// which has no kernel.
// Takes: one data input per tag: the Enter's at iteration 0, the NextIteration's after that.
//   Control inputs are ignored. The loop's first Merge also serves the loop invariants of its
//   partition (LoopPlan::hosted): slot kInvariantSlot + j, invariant j's value, in the parent
//   frame; slot kLoopEndSlot, the loop's LoopCond when false or dead (a live true is not sent:
//   Target::drop_true), which marks the frame's last iteration (from each of its producers here:
//   LoopPlan::loop_end_inputs).
// Sends: the value and its slot's index (output 1, int32) to each consumer with the tag; a dead
//   input (a loop that is not run at all) goes on dead. And as each iteration starts (each
//   input, dead or not), each served invariant's value (dead if it came dead) to that
//   invariant's consumers with the iteration's tag, or as soon as the value comes for the
//   iterations that started before it.
// Per frame (step, frame id), with invariants to serve: their values, the iterations started
//   before a value came, how many have started, and the last once known; freed once every
//   iteration has had every value, or when the step is aborted.
#include "actors/executor/invariant_server.hpp"
#include "actors/executor/node.hpp"
#include "actors/executor/per_frame.hpp"

namespace troupe {

class LoopMergeNode final : public NodeActor {
 public:
  using NodeActor::NodeActor;

 private:
  const LoopPlan* loop_ = &plan_->loop_of(*me_);  // its loop's fields (executable.hpp)
  void on_input(const Tag& tag, uint32_t slot, Value& value) override;
  void drop_step(uint64_t step) override { erase_step(served_, step); }
  void add_waits(std::vector<WaitReport>& out) const override;
  PerFrame<InvariantServer>::iterator served_for(const FrameKey& key);
  void serve(std::size_t invariant, InvariantServer::Invariant& inv, const Tag& tag);
  void forget_if_over(PerFrame<InvariantServer>::iterator it);

  PerFrame<InvariantServer> served_;  // per frame, with invariants to serve (LoopPlan::hosted)
};

}  // namespace troupe
