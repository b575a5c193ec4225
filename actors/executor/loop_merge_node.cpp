#include "actors/executor/loop_merge_node.hpp"

namespace troupe {

void LoopMergeNode::on_input(const Tag& tag, uint32_t slot, Value& value) {
  // Each tag of a loop's Merge has one input: the Enter's at iteration 0, the NextIteration's
  // after that. A dead one (a loop that is not run at all) passes on dead.
  if (slot == kControlSlot) return;
  if (value.dead) {
    emit(tag, nullptr, true);
    return;
  }
  outputs_[0] = std::move(value.tensor);
  outputs_[1] = Tensor::scalar<int32_t>(int32_t(slot));
  emit_owned(tag, outputs_.data());
}

}  // namespace troupe
