#pragma once
// DeviceActor: one per device of this process (CPU:0, and each GPU the registry found),
// spawned with the runtime. Takes
//   (stats_atom) -> DeviceStats: the device's name, description, bytes in use and peak.
//   (reset_peak_atom) -> the peak is set to the bytes in use now.
// It is the device's address in the actor system: later layers send it the work that belongs
// to the device as a whole (GPU streams and their completions, transfers).
#include <string>

#include "actors/messages.hpp"
#include "devices/device.hpp"

namespace troupe {

struct DeviceStats {
  std::string name;
  std::string description;
  std::size_t bytes_in_use = 0;
  std::size_t peak_bytes = 0;
};

using stats_atom = caf::atom_constant<caf::atom("stats")>;
using reset_peak_atom = caf::atom_constant<caf::atom("resetpeak")>;

caf::behavior device_actor(caf::event_based_actor* self, const Device* device);

}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::DeviceStats)
