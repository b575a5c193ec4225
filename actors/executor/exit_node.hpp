#pragma once
// ExitNode (NodeKind::exit): a while loop's Exit (ops/control/while_loop.cpp), which takes a
// loop variable's last value back to the parent frame; no kernel.
// Takes: slot 1, the loop's LoopCond, when false or dead (the executable drops a live true on the
//   way: Target::drop_true); slot 0, the value, only when live (the
//   executable drops dead ones on the way: Target::drop_dead); with a control input (the loop's
//   iteration gate, where a gradient saves values of each iteration), a signal from each
//   NextIteration the gate tells once every iteration has finished (LoopPlan::loop_end), or,
//   where no NextIteration here hears the gate (a partition's control loop), the gate's
//   signal per finished iteration.
// Sends: once per frame, to each consumer with the parent frame's tag: the last iteration's
//   value and the number of iterations that ran (output 1, int32), or dead outputs when the
//   whole loop is dead. Then it tells the frame table that this Exit has left the frame.
// Per frame (step, frame id): the last iteration's value and pred, whichever came first, and
//   (gated) which iterations have finished; freed when it sends.
#include "actors/executor/node.hpp"
#include "actors/executor/per_frame.hpp"

namespace troupe {

class ExitNode final : public NodeActor {
 public:
  using NodeActor::NodeActor;

 private:
  const LoopPlan* loop_ = &plan_->loop_of(*me_);  // its loop's fields (executable.hpp)
  struct ExitState {
    Tensor value;
    int64_t last = -1;  // the iteration whose pred was false or dead
    bool dead = false;
    FinishedIterations done;  // gated
    int ended = 0;            // gated by its NextIterations: how many said every iteration finished
  };

  void on_input(const Tag& tag, uint32_t slot, Value& value) override;
  void drop_step(uint64_t step) override { erase_step(exits_, step); }
  void add_waits(std::vector<WaitReport>& out) const override;

  PerFrame<ExitState> exits_;
};

}  // namespace troupe
