#pragma once
// StepActor: starts and finishes the steps of one Executable; what it takes is its contract
// below.
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

#include "actors/messages.hpp"

namespace troupe {

struct StepPlan;  // executable.hpp

using StepActor = caf::typed_actor<
    // Start step `step` with `feeds`; the StepResult when it ends.
    caf::replies_to<run_atom, uint64_t, std::vector<Tensor>>::with<StepResult>,
    // A fetched value (slot < fetches) or a target's or awaited _Send's signal (kControlSlot).
    caf::reacts_to<input_atom, Tag, uint32_t, Value>,
    // A node failed (on `device`; "" when no node is the cause): answer the error, and tell every
    // node actor to drop the step.
    caf::reacts_to<abort_atom, Tag, int32_t, std::string, std::string>>;

struct StepActorState {
  struct Step {
    caf::typed_response_promise<StepResult> promise;
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

StepActor::behavior_type step_actor(StepActor::stateful_pointer<StepActorState> self,
                                    std::shared_ptr<const StepPlan> plan);

}  // namespace troupe
