#pragma once
// SendNode (NodeKind::send): the producer's side of a data edge between two devices;
// graph/partition.hpp puts a _Send on the producer's device and a _Recv on the consumer's
// (one pair per tensor and destination device, in the producer's frame). No kernel.
// Takes: data slot 0, the value, and every control input of a tag.
// Sends: the value to the _Recv of its rendezvous key with the same tag, so a transfer inside a loop
//   keeps its frame and iteration; dead if any input was dead. Between host devices the tensor
//   is passed as is (the memory is shared).
// Per tag: the inputs so far, in a Pending slot (none without control inputs), freed when it
//   sends.
#include "actors/executor/node.hpp"

namespace troupe {

class SendNode final : public NodeActor {
 public:
  using NodeActor::NodeActor;

 private:
  void fire(const Tag& tag, Tensor* inputs, bool dead) override;
};

}  // namespace troupe
