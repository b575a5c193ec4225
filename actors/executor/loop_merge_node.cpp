#include "actors/executor/loop_merge_node.hpp"

#include "actors/executor/loop_invariant_node.hpp"

namespace troupe {

PerFrame<InvariantServer>::iterator LoopMergeNode::served_for(const FrameKey& key) {
  auto [it, fresh] = served_.try_emplace(key);
  if (fresh) it->second.values.resize(loop_->hosted->size());
  return it;
}

void LoopMergeNode::serve(std::size_t invariant, InvariantServer::Invariant& inv, const Tag& tag) {
  emit_for(plan_->nodes[std::size_t((*loop_->hosted)[invariant])], tag, &inv.value, inv.dead);
}

void LoopMergeNode::forget_if_over(PerFrame<InvariantServer>::iterator it) {
  if (it->second.over(loop_->loop_end_inputs)) served_.erase(it);
}

void LoopMergeNode::on_input(const Tag& tag, uint32_t slot, Value& value) {
  if (slot == kControlSlot) return;
  if (slot < LoopPlan::kLoopEndSlot) {
    // Each tag of a loop's Merge has one input: the Enter's at iteration 0, the NextIteration's
    // after that. A dead one (a loop that is not run at all) passes on dead.
    if (value.dead) {
      emit(tag, nullptr, true);
    } else {
      emit_merged(tag, std::move(value.tensor), slot);
    }
    if (!loop_->hosted) return;
    // The iteration has started: each invariant's value to it, or once the value comes.
    auto it = served_for({tag.step, tag.frame});
    it->second.iteration_started(tag, [this](std::size_t i, InvariantServer::Invariant& inv, const Tag& t) {
      serve(i, inv, t);
    });
    forget_if_over(it);
    return;
  }
  if (slot == LoopPlan::kLoopEndSlot) {
    // The LoopCond, false or dead: this iteration is the frame's last.
    if (value.dead || !value.tensor.scalar_value<bool>()) {
      auto it = served_for({tag.step, tag.frame});
      it->second.last_iteration(tag.iteration);
      forget_if_over(it);
    }
    return;
  }
  // An invariant's value, in the frame around the loop: to every iteration started so far.
  auto it = served_for({tag.step, child_frame_id(tag, loop_->frame_hash)});
  it->second.value_arrived(slot - LoopPlan::kInvariantSlot, value,
                           [this](std::size_t i, InvariantServer::Invariant& inv, const Tag& t) { serve(i, inv, t); });
  forget_if_over(it);
}

void LoopMergeNode::add_waits(std::vector<WaitReport>& out) const {
  for (auto& [key, s] : served_)
    for (std::size_t i = 0; i < s.values.size(); ++i)
      out.push_back(invariant_wait(plan_->nodes[std::size_t((*loop_->hosted)[i])], key, s.started, s.values[i].arrived));
}

}  // namespace troupe
