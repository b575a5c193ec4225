#include "actors/device_actor.hpp"

namespace troupe {

caf::behavior device_actor(caf::event_based_actor*, const Device* device) {
  return {
      [device](stats_atom) {
        return DeviceStats{device->name(), device->description(), device->allocator().bytes_in_use(),
                           device->allocator().peak_bytes()};
      },
      [device](reset_peak_atom) { device->allocator().reset_peak(); },
  };
}

}  // namespace troupe
