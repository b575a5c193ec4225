#pragma once
// Outbox: one per registered graph and peer task, in the sending process. Takes the values of
// the _Sends whose _Recv is on that peer, as a node would: (input_atom, tag, slot, value), the
// slot naming the edge; (ack_atom, bytes) from the peer's inbox; (abort_atom, step) to forget
// the values of a failed step not yet begun. Sends each value over the data connection to the
// peer (data_path.hpp) when there is one: whole, written straight from the tensor, TCP's flow
// control the only window. Else to the peer's inbox as (transfer_atom, RemoteValue) over CAF:
// in one message up to kTransferChunk bytes, else in chunks of that size, at most
// kTransferWindow bytes unacknowledged (CAF's network layer has no back-pressure of its own: it
// would buffer everything); a chunk refers to the tensor (CAF serializes straight from it).
// Float32 values of edges marked float16 are converted first.
// Keeps the values not yet sent in full, oldest first; nothing per tag beyond them.
// Internal to actors/: includes CAF.
#include <caf/all.hpp>

#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/data_path.hpp"
#include "actors/cluster/member_context.hpp"

namespace troupe {

inline constexpr std::size_t kTransferWindow = std::size_t(64) << 20;

struct OutboxEdge {
  uint64_t key = 0;      // fingerprint64 of the rendezvous key
  bool float16 = false;  // a float32 value crosses as float16
};

struct OutboxState {
  struct Item {
    uint32_t edge = 0;
    Tag tag;
    bool dead = false;
    Tensor tensor;
    std::shared_ptr<std::vector<uint16_t>> half;  // its float16 form, if so
    std::shared_ptr<const void> owner;  // keeps the bytes alive while CAF still has to write them
    const uint8_t* bytes = nullptr;
    uint64_t transfer = 0;
    uint64_t offset = 0;  // sent so far
    uint64_t total = 0;   // bytes on the wire
    int64_t traced_since = 0;  // a traced step's value: when it came (core/trace.hpp)
  };
  std::shared_ptr<MemberContext> context;
  caf::actor inbox;
  std::shared_ptr<DataSender> data;  // the data connection to the peer, if any (shared with the worker)
  uint64_t handle = 0;
  std::string peer;  // the task the inbox is of ("worker:1")
  std::vector<OutboxEdge> edges;
  std::deque<Item> queue;
  uint64_t unacked = 0;
  // False until the peer's connection exists (peer_hello_atom, which brings the inbox handle and
  // the data connection to use from then on): values wait.
  bool ready = true;
  static inline const char* name = "troupe.outbox";
};

caf::behavior outbox_actor(caf::stateful_actor<OutboxState>* self, std::shared_ptr<MemberContext> context,
                           caf::actor inbox, std::shared_ptr<DataSender> data, uint64_t handle, std::string peer,
                           std::vector<OutboxEdge> edges, bool ready);

}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::shared_ptr<troupe::DataSender>)
