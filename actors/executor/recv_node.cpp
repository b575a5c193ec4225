#include "actors/executor/recv_node.hpp"

#include <algorithm>

namespace troupe {

void RecvNode::fire(const Tag& tag, Tensor* inputs, bool dead) {
  if (tag.frame == 0) {
    sent_steps_.push_back(tag.step);
    if (sent_steps_.size() > kRemembered) sent_steps_.pop_front();
  }
  pass_input_on(tag, inputs, dead);
}

void RecvNode::add_step_waits(uint64_t step, std::vector<WaitReport>& out) const {
  const Node& node = *me_->node;
  if (!loop_frame(node).empty()) return;  // one value per iteration: not told apart here
  if (std::find(sent_steps_.begin(), sent_steps_.end(), step) != sent_steps_.end()) return;
  for (auto& r : out)
    if (r.node == node.name) return;  // waiting for its control inputs: said already
  const WaitSource source = me_->input_source(0);
  out.push_back(WaitReport{node.name, Tag{step, 0, 0}, 0, 1,
                           {fmt::format("the value of '{}' from {}", source.tensor, source.device)},
                           {source}});
}

}  // namespace troupe
