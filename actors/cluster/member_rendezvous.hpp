#pragma once
// MemberRendezvous: the rendezvous (actors/executor/rendezvous.hpp) of one signature registered
// with a cluster member, whose executable runs the member's share of steps that several tasks
// run. A _Send whose _Recv is on another task goes to the outbox for that task (outbox.hpp), on
// the slot that names its edge; a value from another task comes in through the member's inbox
// (inbox.hpp), which finds its _Recv here by the fingerprint of its rendezvous key. The share is
// answered once every _Send outside loops has fired too (so a partition with no fetch or target,
// a ps's, is not answered before it ran); a failure after the answer goes to the member's
// worker, which tells the master.
// Written by the worker while it registers the signature (send_through, then bind while the
// executable is built), read-only from when the registration is published to the inbox.
#include <caf/all.hpp>

#include <map>
#include <string>
#include <unordered_map>

#include "actors/cluster/worker.hpp"
#include "actors/executor/rendezvous.hpp"

namespace troupe {

class MemberRendezvous final : public Rendezvous {
 public:
  // `worker` is the member's, `handle` the registration's.
  MemberRendezvous(WorkerActor worker, uint64_t handle) : worker_(std::move(worker)), handle_(handle) {}
  // What names a value's rendezvous key on the wire: fingerprint64 of the key.
  static uint64_t key_of(const std::string& rendezvous_key);
  // The _Send of `key` delivers to slot `slot` of `outbox` (set before the executable is built).
  void send_through(const std::string& key, caf::actor outbox, uint32_t slot);
  // The _Recv of the value whose key is `key` (key_of), null when there is none.
  const caf::actor* recv_of(uint64_t key) const;

  bool awaits(const Node& send) const override;
  bool shared() const override { return true; }
  void bind(std::map<std::string, caf::actor> recvs) override;
  void abort(const Tag& tag, ErrorCode code, std::string message, std::string device) const override;

 private:
  std::optional<Target> beyond(const std::string& key) const override;
  WorkerActor worker_;
  uint64_t handle_;
  std::map<std::string, Target> remote_;               // rendezvous key -> outbox slot
  std::unordered_map<uint64_t, caf::actor> recv_of_;  // key_of(rendezvous key) -> _Recv
};

}  // namespace troupe
