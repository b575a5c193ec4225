#pragma once
// ParamShard: owns variables by name and applies reads and updates to them in place. Takes
//   (read_atom, name)                               -> ShardReply{current value}
//   (update_atom, name, kind, value, validate_shape) -> ShardReply{new value}
//   (apply_atom, name, OptimizerSpec, grad, learning_rate) -> ShardReply{} after one optimizer
//                                                      step on the variable and its slots
//   (names_atom)                                    -> the variable names it holds
// kind is a VariableUpdate: assign replaces (and creates) the value; add and sub change it in
// place. A read hands out the buffer itself (no copy); an in-place update of a buffer that a
// reader still holds first copies it, so a value once read never changes under its reader.
// Errors (an uninitialised read, a dtype or shape that does not fit) come back in the reply.
#include <string>
#include <unordered_map>

#include "actors/messages.hpp"

namespace troupe {

struct ParamShardState {
  std::unordered_map<std::string, Tensor> variables;
  // Per variable and optimizer ("w/adam"): the optimizer's slots and its step count.
  struct Slots {
    std::vector<Tensor> tensors;
    int64_t step = 0;
  };
  std::unordered_map<std::string, Slots> slots;
  static inline const char* name = "troupe.param_shard";
};

caf::behavior param_shard(caf::stateful_actor<ParamShardState>* self);

}  // namespace troupe
