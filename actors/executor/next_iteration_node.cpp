#include "actors/executor/next_iteration_node.hpp"

namespace troupe {

NextIterationNode::NextIterationNode(caf::actor_config& config, std::shared_ptr<const ExecPlan> plan, int index,
                                     std::unique_ptr<OpKernel> kernel, int replica)
    : NodeActor(config, std::move(plan), index, std::move(kernel), replica) {
  if (me_->num_controls > 0) defer_inputs();
}

NodeMailbox::Deferral NextIterationNode::deferral() const {
  if (gates_.size() != 1) return {};
  const auto& [key, g] = *gates_.begin();
  oldest_ = Tag{key.first, key.second, g.done.below};
  return {.left = NodeMailbox::kGate, .tag = &oldest_};
}

void NextIterationNode::on_input(const Tag& tag, uint32_t slot, Value& value) {
  // Data: the value for the next iteration. Control: the frame's gate says iteration
  // tag.iteration has finished. Iteration k may start once every iteration up to
  // k - parallel_iterations has finished.
  if (me_->num_controls == 0) {
    // No gate: the value's arrival is the iteration's end (while_loop leaves the gate out
    // when the producer of this value is the body's only sink), so the next one may start.
    if (me_->spread) plan_->frames.iteration_finished(tag);  // its worker may take another
    if (!value.dead) {
      Tag next = tag;
      ++next.iteration;
      emit_owned(next, &value.tensor);
    }
    return;
  }
  auto key = FrameKey{tag.step, tag.frame};
  IterationGate& g = gates_[key];
  const int64_t window = loop_->parallel_iterations;
  if (slot == kControlSlot) {
    if (me_->spread) plan_->frames.iteration_finished(tag);  // its worker may take another
    g.done.finish(tag.iteration);
    for (std::size_t i = 0; i < g.held.size();) {
      if (g.held[i].first.iteration < g.done.below + window) {
        auto [next, tensor] = std::move(g.held[i]);
        g.held.erase(g.held.begin() + std::ptrdiff_t(i));
        emit_owned(next, &tensor);
      } else {
        ++i;
      }
    }
  } else if (value.dead) {
    g.last = tag.iteration;  // the loop is over: nothing goes on to a next iteration
  } else {
    Tag next = tag;
    ++next.iteration;
    if (next.iteration < g.done.below + window) emit_owned(next, &value.tensor);
    else g.held.emplace_back(std::move(next), std::move(value.tensor));
  }
  if (g.last >= 0 && g.done.below > g.last) {
    // Every iteration has finished: the Exits that wait for that hear it now (LoopPlan::loop_end).
    const Tag through{tag.step, tag.frame, g.last};
    gates_.erase(key);
    for (const Target& t : loop_->loop_end) deliver(unit(), t, through, kControlSlot, Value{Tensor(), false}, -1);
  }
}

void NextIterationNode::add_waits(std::vector<WaitReport>& out) const {
  // Loop state still held: what a NextIteration waits for.
  for (auto& [key, g] : gates_) {
    WaitReport r{me_->node->name, Tag{key.first, key.second, g.done.below}, 0, 1, {}};
    r.missing.push_back(
        fmt::format("iteration {} of its frame to finish ({} value(s) held back, parallel_iterations {})", g.done.below,
                    g.held.size(), loop_->parallel_iterations));
    out.push_back(std::move(r));
  }
}

}  // namespace troupe
