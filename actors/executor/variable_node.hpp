#pragma once
// VariableNode (NodeKind::variable): a variable op (ops/state/variable.hpp), which has no
// kernel: the parameter shard holding its variable (actors/state/param_shard.hpp) does the work.
// Takes: every data input of a tag and every control input, or the start signal of a source
//   node (a read).
// Sends: per tag, one request to the shard, the one StatePlan::variable_op names (a read, an
//   update, an optimizer step), and the value it replies to each consumer with the tag. A
//   dead input sends dead outputs and asks nothing. A shard's error, or a shard that does not
//   answer in time (actors/timeouts.hpp), goes to the step actor; the reply of an aborted step
//   is dropped.
// Per tag: the inputs so far, in a Pending slot, freed when the request is sent; then the
// request, until answered (a step's waits report names it: "the parameter shard's answer to the
// wait for the next global step of variable 'global_step'").
#include <map>
#include <string>

#include "actors/executor/node.hpp"

namespace troupe {

class VariableNode final : public NodeActor {
 public:
  using NodeActor::NodeActor;

 private:
  void fire(const Tag& tag, Tensor* inputs, bool dead) override;
  void request_from_shard(const Tag& tag, Tensor* inputs);
  // Sends `message` to the shard (`what` it asks of variable `name`, for errors and the waits
  // report): its answer goes to the consumers, its error or the shard's silence to the step actor.
  template <class... Ts>
  void ask_shard(const Tag& tag, const std::string& name, const char* what, Ts&&... message);
  // A traced step's request to the shard, from `start` to its answer (core/trace.hpp).
  void trace_request(const Tag& tag, int64_t start) const;
  // The requests of each step still unanswered, by what they ask (for the hang report).
  void add_waits(std::vector<WaitReport>& out) const override;
  // A global step's shard says whose votes this step still waits for: the report names them.
  void on_wait_note(uint64_t step, std::string text) override;
  std::multimap<uint64_t, std::string> asked_;
  const StatePlan* state_ = &plan_->state_of(*me_);  // its stack, queue or shard
};

}  // namespace troupe
