#pragma once
// NextIterationNode (NodeKind::next_iteration): a while loop's NextIteration
// (ops/control/while_loop.cpp), which carries a loop variable's value on to the next
// iteration; no kernel.
// Takes: slot 0, the value an iteration computed (dead when the loop is over); with a control
//   input (the frame's iteration gate), a signal per finished iteration, in any order.
// Sends: the value to each consumer (the loop's Merge) with the tag of the next iteration, at
//   most parallel_iterations ahead of the oldest iteration not yet finished; a value for an
//   iteration not allowed to start yet is held until it is. A dead value sends nothing. Once
//   every iteration of a frame has finished, a control signal tagged with the last iteration
//   to the loop's Exits that wait for that (LoopPlan::loop_end).
// Per frame (step, frame id), gated only: which iterations have finished, the values held back
//   and the iteration that found the loop over; freed once every iteration has finished.
// While it keeps the gate of one frame only, the gate's signals of other iterations than that
//   frame's oldest unfinished one wait in its mailbox, unclaimed, until something else claims it
//   (NodeMailbox::kGate): they change nothing it sends.
#include "actors/executor/node.hpp"
#include "actors/executor/per_frame.hpp"

namespace troupe {

class NextIterationNode final : public NodeActor {
 public:
  NextIterationNode(caf::actor_config& config, std::shared_ptr<const ExecPlan> plan, int index,
                    std::unique_ptr<OpKernel> kernel = nullptr, int replica = 0);

 private:
  const LoopPlan* loop_ = &plan_->loop_of(*me_);  // its loop's fields (executable.hpp)
  struct IterationGate {
    FinishedIterations done;
    std::vector<std::pair<Tag, Tensor>> held;  // values for iterations not allowed to start yet
    int64_t last = -1;                         // the iteration that found the loop over
  };

  void on_input(const Tag& tag, uint32_t slot, Value& value) override;
  // Gated, keeping the gate of one frame: a gate signal of another iteration than that frame's
  // oldest unfinished one waits in the mailbox (NodeMailbox::kGate).
  NodeMailbox::Deferral deferral() const override;
  void drop_step(uint64_t step) override { erase_step(gates_, step); }
  void add_waits(std::vector<WaitReport>& out) const override;

  PerFrame<IterationGate> gates_;
  mutable Tag oldest_;             // what deferral() points to: changed only in the node's turns
};

}  // namespace troupe
