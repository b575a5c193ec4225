#include "actors/executor/rendezvous.hpp"

namespace troupe {

Target Rendezvous::resolve(const std::string& key, const Target* own, const std::string& where) const {
  if (own) return *own;
  std::optional<Target> target = beyond(key);
  if (!target) fail(ErrorCode::internal, "{}: no _Recv has its rendezvous key '{}'", where, key);
  return *target;
}

}  // namespace troupe
