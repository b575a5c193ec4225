#include "actors/executor/merge_node.hpp"

namespace troupe {

void MergeNode::on_input(const Tag& tag, uint32_t slot, Value& value) {
  // Outputs: the first live data input, and its index. Every input of the tag is still
  // counted, so the slot is freed when the last (dead) one arrives.
  Pending& p = pending_for(tag);
  if (slot != kControlSlot && slot < 64) p.arrived |= uint64_t(1) << slot;
  if (slot != kControlSlot && !value.dead && !p.dead) {
    p.dead = true;  // here: "has fired"
    outputs_[0] = std::move(value.tensor);
    if (!me_->outputs[1].empty()) outputs_[1] = Tensor::scalar<int32_t>(int32_t(slot));  // only if read
    emit_owned(tag, outputs_.data());
  }
  if (--p.remaining > 0) return;
  if (!p.dead) emit(tag, nullptr, true);  // every data input was dead
  release(p);
}

}  // namespace troupe
