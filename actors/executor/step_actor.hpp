#pragma once
// StepActor: starts and finishes the steps of one Executable. Takes
//   (run_atom, step, feeds)               start a step; replies a StepResult when it ends;
//   (input_atom, Tag, slot, Value)        a fetched value (slot < fetches) or a target's
//                                         control signal (kControlSlot);
//   (abort_atom, Tag, code, message, device)
//                                         a node failed (on `device`; "" when no node is the
//                                         cause): reply the error, and tell every node actor
//                                         to drop the step.
// Per step it keeps the response promise, the fetches so far and how many reports are still
// due; the entry is erased when the step ends, either way. Reports of ended steps are ignored.
// The step actor of a shared rendezvous (Rendezvous::shared: this executable runs a share of
// steps that others run too) also keeps reports that come before their step's run (values from
// elsewhere may start work here first), hands a failure after its answer to the rendezvous, and
// remembers the last 4096 steps that ended, whose late reports it drops.
#include <deque>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "actors/executor/executable.hpp"

namespace troupe {

struct StepActorState {
  struct Step {
    caf::response_promise promise;
    std::vector<Tensor> fetches;
    int remaining = 0;
  };
  std::shared_ptr<const StepPlan> plan;
  std::unordered_map<uint64_t, Step> steps;
  std::unordered_map<uint64_t, std::vector<std::pair<uint32_t, Value>>> early;
  std::unordered_set<uint64_t> ended;
  std::deque<uint64_t> ended_order;
  void remember_ended(uint64_t step);
  static inline const char* name = "troupe.step";
};

caf::behavior step_actor(caf::stateful_actor<StepActorState>* self,
                         std::shared_ptr<const StepPlan> plan);

}  // namespace troupe
