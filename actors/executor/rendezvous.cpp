#include "actors/executor/rendezvous.hpp"

namespace troupe {

Target LocalRendezvous::resolve(const Node&, const std::string& key, const Target* own, const std::string& where) const {
  if (!own) fail(ErrorCode::internal, "{}: no _Recv has its rendezvous key '{}'", where, key);
  return *own;
}

}  // namespace troupe
