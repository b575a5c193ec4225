#pragma once
// A Target: where a node's output (or a control signal) goes, one input slot of one actor.
#include <cstddef>
#include <cstdint>

#include "actors/messages.hpp"

namespace troupe {

class NodeActor;

struct Target {
  caf::actor actor;
  uint32_t slot;
  bool drop_dead = false;  // an Exit's data input: only the last iteration's live value matters
  // An Exit's or a loop invariant's pred (the LoopCond): a live true, which every iteration but
  // the last sends, says only that the loop goes on, and is not sent (a message and a turn of
  // each Exit and each loop invariant an iteration: they act only on the false or dead).
  bool drop_true = false;
  // A node with one actor per worker (NodePlan::replicas): iteration k goes to the replica of
  // the worker it runs on (node.hpp, deliver()) instead of `node`, which is replicas[0]. (The
  // count sits in padding, so a Target stays 32 bytes.)
  uint16_t replica_count = 0;
  NodeActor* node = nullptr;  // the actor's, when it is a node on the fast path (node.hpp)
  NodeActor* const* replicas = nullptr;
  // The replica that takes the inputs of iterations on worker `r` (deliver(), prefetch_mailbox()).
  NodeActor* replica(int r) const { return replicas[std::size_t(r) % replica_count]; }
};
static_assert(sizeof(Target) == 32, "a Target stays 32 bytes: two to a cache line");

}  // namespace troupe
