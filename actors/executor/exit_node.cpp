#include "actors/executor/exit_node.hpp"

namespace troupe {

void ExitNode::on_input(const Tag& tag, uint32_t slot, Value& value) {
  // Slot 1, the LoopCond, arrives every iteration (a live true is dropped on the way,
  // Target::drop_true, but may come from elsewhere): true, the loop goes on; dead, the whole loop
  // is dead and exits dead; false, this is the last iteration, whose value (slot 0, sent only
  // when live) leaves the frame, with the number of iterations that ran. Those of the last
  // iteration may come in either order. With a control input (the loop's iteration gate, where
  // a gradient saves values of each iteration) the Exit also waits until every iteration has
  // finished: told so once by each NextIteration the gate tells (LoopPlan::loop_end_signals),
  // or by the gate itself for each iteration.
  if (slot == 1 && !value.dead && value.tensor.scalar_value<bool>()) return;
  const bool gated = me_->num_controls > 0;
  if (slot == kControlSlot && !gated) return;
  auto [it, fresh] = exits_.try_emplace(FrameKey{tag.step, tag.frame});
  ExitState& e = it->second;
  if (slot == 0) {
    e.value = std::move(value.tensor);
  } else if (slot == 1) {
    e.last = tag.iteration;
    e.dead = value.dead;
  } else if (loop_->loop_end_signals == 0) {
    e.done.finish(tag.iteration);
  } else if (++e.ended == loop_->loop_end_signals) {
    e.done.below = std::max(e.done.below, tag.iteration + 1);  // every iteration through this one
  }
  if (e.last < 0 || (!e.dead && !e.value.is_initialized()) || (gated && e.done.below <= e.last)) return;
  ExitState left = std::move(e);
  exits_.erase(it);
  const std::optional<Tag> parent = plan_->frames.parent(tag);
  if (!parent) {  // a failed step's frame (nothing leaves it), or one this partition never entered
    report_unknown_frame(tag, loop_frame(plan_->graph->node(me_->node->inputs[0].node)));
    return;
  }
  plan_->frames.exited(tag);
  if (left.dead) {
    emit(*parent, nullptr, true);
    return;
  }
  std::array<Tensor, 2> out{std::move(left.value), Tensor::scalar<int32_t>(int32_t(left.last))};
  emit_owned(*parent, out.data());
}

void ExitNode::add_waits(std::vector<WaitReport>& out) const {
  for (auto& [key, e] : exits_) {
    WaitReport r{me_->node->name, Tag{key.first, key.second, 0}, 1, 2, {}};
    if (e.last < 0) r.missing.push_back("the loop's last LoopCond");
    else if (!e.dead && !e.value.is_initialized()) r.missing.push_back("the last iteration's value");
    else
      r.missing.push_back(
          fmt::format("every iteration through {} to finish (iteration {} has not)", e.last, e.done.below));
    out.push_back(std::move(r));
  }
}

}  // namespace troupe
