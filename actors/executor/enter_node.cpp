#include "actors/executor/enter_node.hpp"

namespace troupe {

void EnterNode::fire(const Tag& tag, Tensor* inputs, bool dead) {
  const Tag entered = plan_->frames.enter(tag, get_attr<std::string>(me_->node->attrs, "frame_name", me_->node->name),
                                         me_->frame_hash, me_->frame_exits, me_->frame_enters);
  if (dead) emit(entered, inputs, true);
  else emit_owned(entered, inputs);  // the inputs are let go of after this firing anyway
}

}  // namespace troupe
