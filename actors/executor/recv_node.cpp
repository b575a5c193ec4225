#include "actors/executor/recv_node.hpp"

namespace troupe {

void RecvNode::fire(const Tag& tag, Tensor* inputs, bool dead) { pass_input_on(tag, inputs, dead); }

}  // namespace troupe
