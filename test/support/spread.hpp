#pragma once
// Whether this run spreads each graph over several devices: TROUPE_PLACEMENT=alternate hands
// the nodes free to move the devices in turn (the *_spread ctest entries set it, with
// TROUPE_CPU_DEVICES=3). A check that names the device a node runs on holds only unspread.
#include <cstdlib>
#include <string_view>

namespace troupe::testing {

inline bool spread() {
  const char* policy = std::getenv("TROUPE_PLACEMENT");
  return policy && std::string_view(policy) == "alternate";
}

}  // namespace troupe::testing
