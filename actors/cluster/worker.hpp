#pragma once
// The worker actor of a cluster member (troupe-node): the one actor a process publishes on its
// task's address; peers reach everything else of the process through it. Takes
//   (identify_atom)  replies (task, incarnation, devices): "worker:0", the member's incarnation
//                    (random at start: a restarted process is a new one), its devices' full
//                    names joined by ','.
// Keeps no state per request. Partition registration and steps come next (docs/cluster.md).
// Internal to actors/: includes CAF.
#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace troupe {

using identify_atom = caf::atom_constant<caf::atom("identify")>;

struct WorkerState {
  std::string task;
  uint64_t incarnation = 0;
  std::string devices;
  static inline const char* name = "troupe.worker";
};

caf::behavior worker_actor(caf::stateful_actor<WorkerState>* self, std::string task, uint64_t incarnation,
                           std::string devices);

}  // namespace troupe
