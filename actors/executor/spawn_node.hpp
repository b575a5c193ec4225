#pragma once
// The actor of one node of an executable's plan, of the class its NodePlan::kind names
// (node_kind.hpp). Only a kernel node takes a kernel; it must have one, and no other kind may.
// The actor is spawned lazily: it runs from its first message, which comes once the plan
// is complete.
#include <memory>

#include "actors/executor/executable.hpp"

namespace troupe {

class NodeActor;

// A node's actor: its handle, and the node itself (the class behind the handle, without a
// dynamic_cast, which compares type names across libraries).
struct SpawnedNode {
  caf::actor actor;
  NodeActor* node = nullptr;
};

// `replica`: which of the node's actors (NodePlan::replicas), 0 for its own.
SpawnedNode spawn_node(caf::actor_system& system, std::shared_ptr<const ExecPlan> plan, int index,
                       std::unique_ptr<OpKernel> kernel, int replica = 0);

}  // namespace troupe
