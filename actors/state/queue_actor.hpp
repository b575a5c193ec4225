#pragma once
// QueueActor: one queue of ops/data/queue.hpp, owned by the process's Runtime. Takes
//   (enqueue_atom, step, components, many)   -> QueueReply {}          (waits while full)
//   (dequeue_atom, step, n, allow_smaller)   -> QueueReply {components} (n < 0: one element;
//                                               waits until there are enough, or closed)
//   (close_atom, cancel_pending_enqueues, failure) -> QueueReply {}
//                                               failure.code != ok: the producer failed; a
//                                               dequeue the remaining elements cannot serve
//                                               gets `failure` instead of out_of_range
//   (size_atom)                              -> QueueReply {int32 size}
//   (cancel_atom, step)                      drops the waiting requests of an aborted step
// Requests that cannot be served wait as response promises inside the actor, so neither the
// node actor that asked nor a scheduler thread waits; they are served in arrival order as
// elements and room appear.
#include "actors/messages.hpp"
#include "ops/data/queue.hpp"

namespace troupe {

struct QueueReply {
  std::vector<Tensor> values;
  ErrorCode code = ErrorCode::ok;
  std::string message;
};

using enqueue_atom = caf::atom_constant<caf::atom("enqueue")>;
using dequeue_atom = caf::atom_constant<caf::atom("dequeue")>;
using close_atom = caf::atom_constant<caf::atom("close")>;
using size_atom = caf::atom_constant<caf::atom("size")>;
using cancel_atom = caf::atom_constant<caf::atom("cancel")>;

caf::actor spawn_queue(caf::actor_system& system, const QueueSpec& spec);

}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::QueueReply)
