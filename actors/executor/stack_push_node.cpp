#include "actors/executor/stack_push_node.hpp"

namespace troupe {

void StackPushNode::on_input(const Tag& tag, uint32_t slot, Value& value) {
  if (slot == kControlSlot) return;
  auto path = plan_->frames.iterations(tag);
  if (!path) {  // the step has failed, or this partition never entered a frame of the tag
    report_unknown_frame(tag, loop_frame(*me_->node));
    return;
  }
  plan_->stacks.push(tag.step, state_->stack_hash, std::move(*path), std::move(value));
  emit(tag, nullptr, false);  // control outputs: the iteration gate
}

}  // namespace troupe
