#include "actors/cluster/member_rendezvous.hpp"

#include "core/fingerprint.hpp"
#include "graph/graph.hpp"

namespace troupe {

uint64_t MemberRendezvous::key_of(const std::string& rendezvous_key) { return fingerprint64(rendezvous_key); }

void MemberRendezvous::send_through(const std::string& key, caf::actor outbox, uint32_t slot) {
  remote_[key] = Target{std::move(outbox), slot};
}

const caf::actor* MemberRendezvous::recv_of(uint64_t key) const {
  auto it = recv_of_.find(key);
  return it == recv_of_.end() ? nullptr : &it->second;
}

std::optional<Target> MemberRendezvous::beyond(const std::string& key) const {
  auto it = remote_.find(key);
  if (it == remote_.end()) return std::nullopt;
  return it->second;
}

bool MemberRendezvous::awaits(const Node& send) const { return loop_frame(send).empty(); }

void MemberRendezvous::bind(std::map<std::string, caf::actor> recvs) {
  for (auto& [key, actor] : recvs) recv_of_[key_of(key)] = std::move(actor);
}

void MemberRendezvous::abort(const Tag& tag, ErrorCode code, std::string message, std::string device) const {
  caf::anon_send(worker_, abort_atom::value, handle_, tag, int32_t(code), std::move(message), std::move(device));
}

}  // namespace troupe
