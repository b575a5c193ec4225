#include "actors/executor/enter_node.hpp"

namespace troupe {

void EnterNode::fire(const Tag& tag, Tensor* inputs, bool dead) {
  const Tag entered = plan_->frames.enter(tag, get_attr<std::string>(me_->node->attrs, "frame_name", me_->node->name),
                                         loop_->frame_hash, loop_->frame_exits, loop_->frame_enters);
  if (dead) emit(entered, inputs, true);
  else emit_owned(entered, inputs);  // the inputs are let go of after this firing anyway
}

}  // namespace troupe
