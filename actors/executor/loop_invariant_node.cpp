#include "actors/executor/loop_invariant_node.hpp"

namespace troupe {

void LoopInvariantNode::serve(Invariant& inv, const Tag& tag) {
  emit(tag, &inv.value, inv.dead);
  ++inv.served;
}

void LoopInvariantNode::forget_if_over(PerFrame<Invariant>::iterator it) {
  const Invariant& inv = it->second;
  if (inv.arrived && inv.end >= 0 && inv.served > inv.end) invariants_.erase(it);
}

void LoopInvariantNode::on_input(const Tag& tag, uint32_t slot, Value& value) {
  // Slot 0: the value, in the parent frame. Control: iteration tag.iteration of the frame has
  // started (from the loop's first Merge). Slot 1: the loop's LoopCond; false or dead marks
  // the frame's last iteration. The value is kept until every iteration has had it.
  if (slot == 0) {
    auto it = invariants_.try_emplace({tag.step, child_frame_id(tag, me_->frame_hash)}).first;
    Invariant& inv = it->second;
    inv.arrived = true;
    inv.dead = value.dead;
    inv.value = std::move(value.tensor);
    for (auto& t : inv.waiting) serve(inv, t);
    inv.waiting.clear();
    forget_if_over(it);
    return;
  }
  auto it = invariants_.try_emplace({tag.step, tag.frame}).first;
  Invariant& inv = it->second;
  if (slot == kControlSlot) {
    if (inv.arrived) serve(inv, tag);
    else inv.waiting.push_back(tag);
  } else if (value.dead || !value.tensor.scalar_value<bool>()) {
    inv.end = tag.iteration;
  }
  forget_if_over(it);
}

WaitReport invariant_wait(const NodePlan& invariant, const FrameKey& frame, int64_t served, bool arrived) {
  WaitReport r{invariant.node->name, Tag{frame.first, frame.second, served}, 0, 1, {}};
  r.missing.push_back(arrived ? fmt::format("the loop's last iteration ({} served so far)", served)
                              : "the loop invariant " + invariant.input_name(0));
  return r;
}

void LoopInvariantNode::add_waits(std::vector<WaitReport>& out) const {
  for (auto& [key, inv] : invariants_) out.push_back(invariant_wait(*me_, key, inv.served, inv.arrived));
}

}  // namespace troupe
