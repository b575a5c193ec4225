#include "actors/cluster/worker.hpp"

namespace troupe {

caf::behavior worker_actor(caf::stateful_actor<WorkerState>* self, std::string task, uint64_t incarnation,
                           std::string devices) {
  self->state.task = std::move(task);
  self->state.incarnation = incarnation;
  self->state.devices = std::move(devices);
  return {
      [self](identify_atom) -> caf::result<std::string, uint64_t, std::string> {
        return {self->state.task, self->state.incarnation, self->state.devices};
      },
  };
}

}  // namespace troupe
