#include "actors/executor/send_node.hpp"

namespace troupe {

void SendNode::fire(const Tag& tag, Tensor* inputs, bool dead) { pass_input_on(tag, inputs, dead); }

}  // namespace troupe
