#pragma once
// QueueActor: one queue of ops/data/queue.hpp, owned by the process's Runtime; what it takes is
// its contract below. Requests that cannot be served wait as response promises inside the actor, so neither the
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

using QueueActor = caf::typed_actor<
    // (step, components, many) -> {} once enqueued (waits while full).
    caf::replies_to<enqueue_atom, uint64_t, std::vector<Tensor>, bool>::with<QueueReply>,
    // (step, n, allow_smaller) -> {components}: n < 0: one element; waits until there are
    // enough, or the queue is closed.
    caf::replies_to<dequeue_atom, uint64_t, int64_t, bool>::with<QueueReply>,
    // (cancel_pending_enqueues, failure) -> {}: failure.code != ok: the producer failed; a
    // dequeue the remaining elements cannot serve gets `failure` instead of out_of_range.
    caf::replies_to<close_atom, bool, QueueReply>::with<QueueReply>,
    caf::replies_to<size_atom>::with<QueueReply>,  // {int32 size}
    caf::reacts_to<cancel_atom, uint64_t>>;        // drops the waiting requests of an aborted step

QueueActor spawn_queue(caf::actor_system& system, const QueueSpec& spec);

}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::QueueReply)
