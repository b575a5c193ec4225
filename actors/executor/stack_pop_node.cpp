#include "actors/executor/stack_pop_node.hpp"

namespace troupe {

void StackPopNode::fire(const Tag& tag, Tensor* inputs, bool dead) {
  // Inputs: the iteration counts of the forward loops being differentiated, innermost
  // first (this loop's, then those of the loops around it). Iteration j of each gradient
  // loop stands for iteration n - 1 - j of its forward loop; frames above those keep their
  // iterations. The last, dead, iteration of a gradient loop (j = n) takes nothing.
  if (dead) {
    emit(tag, nullptr, true);
    return;
  }
  try {
    // Level 0 is this loop: its iteration is the tag's, so its last, dead, iteration is
    // known (and takes nothing) without looking the frames up.
    auto forward = [&](int level, int64_t j) { return int64_t(inputs[level].scalar_value<int32_t>()) - 1 - j; };
    if (forward(0, tag.iteration) < 0) {
      emit(tag, nullptr, true);
      return;
    }
    auto found = plan_->frames.iterations(tag);
    if (!found) {  // the step has failed, or this partition never entered a frame of the tag
      report_unknown_frame(tag, loop_frame(*me_->node));
      return;
    }
    StackStore::Path path = std::move(*found);
    if (int(path.size()) < me_->num_inputs)
      fail(ErrorCode::internal, "a StackPop outside the gradient loops it takes counts of");
    for (int level = 0; level < me_->num_inputs; ++level) {
      int64_t& j = path[path.size() - 1 - std::size_t(level)];
      j = forward(level, j);
      if (j < 0) {
        emit(tag, nullptr, true);
        return;
      }
    }
    Value v = plan_->stacks.pop(tag.step, state_->stack_hash, path);
    emit(tag, &v.tensor, v.dead);
  } catch (const Error& e) {
    report_error(tag, e.code(), e.what());
  }
}

}  // namespace troupe
