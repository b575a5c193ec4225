#include "actors/scheduler.hpp"

namespace troupe {

caf::actor_system::module* make_scheduler(caf::actor_system& system) {
  return new SchedulerCoordinator<SchedulingPolicy>(system);
}

}  // namespace troupe
