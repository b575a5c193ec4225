#pragma once
// RecvNode (NodeKind::recv): the consumer's side of a data edge between two devices (its
// _Send is send_node.hpp). No kernel.
// Takes: data slot 0, the value from the _Send, and every control input of a tag (control
//   inputs hold the value back until they have arrived).
// Sends: the value to its consumers on this device with the same tag; dead if any input was
//   dead.
// Per tag: the inputs so far, in a Pending slot (none without control inputs), freed when it
//   sends; the steps it sent in lately (outside loops), so that a wait report of a running step
//   can say the value has not come ("the value of 'x:0' from /job:ps/task:0/device:CPU:0").
#include <deque>

#include "actors/executor/node.hpp"

namespace troupe {

class RecvNode final : public NodeActor {
 public:
  using NodeActor::NodeActor;

 private:
  void fire(const Tag& tag, Tensor* inputs, bool dead) override;
  void add_step_waits(uint64_t step, std::vector<WaitReport>& out) const override;
  std::deque<uint64_t> sent_steps_;  // the last kRemembered steps it sent in (outside loops)
  static constexpr std::size_t kRemembered = 64;
};

}  // namespace troupe
