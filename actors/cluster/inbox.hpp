#pragma once
// Inbox: one per cluster member process. Takes (transfer_atom, RemoteValue) from other members'
// outboxes and answers each with (ack_atom, bytes) to its sender; puts chunks together (a tensor
// is allocated once and its chunks are read straight into it, tensor_transfer.hpp) and hands
// each complete value, or dead one, to the _Recv of its key in its registration. A value whose
// sender incarnation the registration does not know (from before a restart) is dropped and
// counted; a value for a key no _Recv has, or a bad chunk, fails its step. Takes (abort_atom,
// handle, step): that registration's step failed, its partly received tensors and late chunks are dropped; and
// (peer_lost_atom, incarnation) from the worker: what that process had half sent is dropped.
// Keeps per transfer in progress its partial tensor and step; the last 1024 failed steps.
// Internal to actors/: includes CAF.
#include <caf/all.hpp>

#include <deque>
#include <memory>
#include <set>
#include <utility>
#include <unordered_map>
#include <unordered_set>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/member_context.hpp"

namespace troupe {

struct InboxState {
  std::shared_ptr<MemberContext> context;
  TensorAssembler assembler;
  using Step = std::pair<uint64_t, uint64_t>;  // (registration handle, step): steps of different sessions
  struct InProgress {
    Step step;
    uint64_t sender = 0;  // the sending process's incarnation
  };
  std::unordered_map<uint64_t, InProgress> in_progress;  // by transfer
  std::set<Step> aborted;  // the last 1024 steps that failed: their chunks are dropped
  std::deque<Step> aborted_order;
  uint64_t refused = 0;  // values from an incarnation no registration knows
  std::unordered_map<uint64_t, int64_t> traced_since;  // a traced step's transfers: first chunk's time
  static inline const char* name = "troupe.inbox";
};

caf::behavior inbox_actor(caf::stateful_actor<InboxState>* self, std::shared_ptr<MemberContext> context);

}  // namespace troupe
