#include "actors/executor/merge_node.hpp"

namespace troupe {

void MergeNode::on_input(const Tag& tag, uint32_t slot, Value& value) {
  // Outputs: the first live data input, and its index. Every input of the tag is still
  // counted, so the slot is freed when the last (dead) one arrives.
  Pending& p = pending_for(tag);
  if (slot != kControlSlot && slot < 64) p.arrived |= uint64_t(1) << slot;
  if (slot != kControlSlot && !value.dead && !p.dead) {
    p.dead = true;  // here: "has fired"
    emit_merged(tag, std::move(value.tensor), slot);
  }
  if (--p.remaining > 0) return;
  if (!p.dead) emit(tag, nullptr, true);  // every data input was dead
  release(p);
}

}  // namespace troupe
