#pragma once
// MergeNode (NodeKind::merge): a cond's Merge (ops/control/control_flow.hpp), which has no
// kernel.
// Takes: every data input of a tag (one per branch; all but one arrive dead) and every control
//   input.
// Sends: on the first live data input of a tag, that value and its slot's index (output 1,
//   int32) to each consumer with the tag; dead outputs if every data input was dead.
// Per tag: a Pending slot that counts the inputs (data inputs are not kept), freed when the
//   last one has arrived.
#include "actors/executor/node.hpp"

namespace troupe {

class MergeNode final : public NodeActor {
 public:
  using NodeActor::NodeActor;

 private:
  void on_input(const Tag& tag, uint32_t slot, Value& value) override;
};

}  // namespace troupe
