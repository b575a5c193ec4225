#pragma once
// A TCP port nothing listens on now, on 127.0.0.1 (the OS picks it; a test that starts a
// process on it right away races only with other programs binding ports at that moment).
#include <cstdint>

#include "actors/cluster/cluster_spec.hpp"

namespace troupe::testing {

inline uint16_t free_port() { return free_loopback_ports(1).front(); }

}  // namespace troupe::testing
