#include "actors/executor/loop_invariant_node.hpp"

namespace troupe {

PerFrame<InvariantServer>::iterator LoopInvariantNode::served_for(const FrameKey& key) {
  auto [it, fresh] = invariants_.try_emplace(key);
  if (fresh) it->second.values.resize(1);
  return it;
}

void LoopInvariantNode::forget_if_over(PerFrame<InvariantServer>::iterator it) {
  if (it->second.over(1)) invariants_.erase(it);
}

void LoopInvariantNode::on_input(const Tag& tag, uint32_t slot, Value& value) {
  // Slot 0: the value, in the parent frame. Control: iteration tag.iteration of the frame has
  // started (from the loop's first Merge). Slot 1: the loop's LoopCond; false or dead marks
  // the frame's last iteration. The value is kept until every iteration has had it.
  auto serve = [this](std::size_t, InvariantServer::Invariant& inv, const Tag& t) { emit(t, &inv.value, inv.dead); };
  if (slot == 0) {
    auto it = served_for({tag.step, child_frame_id(tag, loop_->frame_hash)});
    it->second.value_arrived(0, value, serve);
    forget_if_over(it);
    return;
  }
  auto it = served_for({tag.step, tag.frame});
  if (slot == kControlSlot) it->second.iteration_started(tag, serve);
  else if (value.dead || !value.tensor.scalar_value<bool>()) it->second.last_iteration(tag.iteration);
  forget_if_over(it);
}

WaitReport invariant_wait(const NodePlan& invariant, const FrameKey& frame, int64_t served, bool arrived) {
  WaitReport r{invariant.node->name, Tag{frame.first, frame.second, served}, 0, 1, {}};
  r.missing.push_back(arrived ? fmt::format("the loop's last iteration ({} served so far)", served)
                              : "the loop invariant " + invariant.input_name(0));
  return r;
}

void LoopInvariantNode::add_waits(std::vector<WaitReport>& out) const {
  for (auto& [key, s] : invariants_) out.push_back(invariant_wait(*me_, key, s.served(0), s.values[0].arrived));
}

}  // namespace troupe
