#pragma once
// The CAF internals Troupe's runtime relies on, behind short names: the only file in actors/
// that includes CAF's internal headers (caf/policy, caf/scheduler's coordinator and worker) or
// names what CAF keeps private, and so the one file to revisit when CAF is upgraded (written
// against CAF 0.17.6). Why each is needed:
// - policy::unprofiled, scheduler::coordinator/worker/abstract_coordinator: Troupe's
//   work-stealing scheduler (scheduler.hpp) is a CAF scheduling policy (SchedulerPolicyBase).
// - resumable, subclassed: a fast node's turn and a batch of ready nodes are jobs a worker runs
//   without a message through CAF's mailbox (Job; executor/fast_path.hpp).
// - intrusive_ptr_add_ref/_release on an actor's control block: a queued job keeps its node's
//   actor alive (hold_actor, release_actor).
// - abstract_actor::eq_impl: an input sent with the sender's execution unit, so the receiver is
//   scheduled on the sending worker; anon_send has none (enqueue_from).
// - monitorable_actor::cleanup, overridden: a node tells its Executable it has exited without a
//   monitor's message per node (CleanupHookActor).
// - make_actor and local_actor::launch, as actor_system::spawn calls them: a node spawned
//   without making the system's logger the thread's current one (spawn_quietly).
// Internal to actors/: keep it out of public headers.
#include <caf/all.hpp>
#include <caf/policy/unprofiled.hpp>
#include <caf/scheduler/coordinator.hpp>
#include <caf/scheduler/worker.hpp>

#include <utility>

namespace troupe {

// -- the scheduler --

using SchedulerPolicyBase = caf::policy::unprofiled;
using SchedulerParent = caf::scheduler::abstract_coordinator;
template <class Policy>
using SchedulerWorker = caf::scheduler::worker<Policy>;
template <class Policy>
using SchedulerCoordinator = caf::scheduler::coordinator<Policy>;

// -- jobs --

// What a worker runs: an actor's turn, or one of the fast path's (NodeRunner, ReadyBatch).
using Job = caf::resumable;

// A reference to the actor of `ctrl` for a job that runs it, taken before the job is queued.
inline void hold_actor(caf::actor_control_block* ctrl) { caf::intrusive_ptr_add_ref(ctrl); }
// Gives that reference back (the job has run, or was never queued).
inline void release_actor(caf::actor_control_block* ctrl) { caf::intrusive_ptr_release(ctrl); }

// -- messages --

// Puts the message `xs...` into `to`'s mailbox without a sender, as from `context` (null: CAF's
// central queue schedules the receiver).
template <class... Ts>
void enqueue_from(caf::execution_unit* context, const caf::actor& to, Ts&&... xs) {
  to->eq_impl(caf::make_message_id(), nullptr, context, std::forward<Ts>(xs)...);
}

// -- actors --

// An event-based actor told when CAF's cleanup of it (its exit) has run: on_cleaned_up() runs
// once, on the thread of the exit, after CAF has done with the actor's state.
class CleanupHookActor : public caf::event_based_actor {
 public:
  using caf::event_based_actor::event_based_actor;
  bool cleanup(caf::error&& reason, caf::execution_unit* host) override {
    const bool cleaned = caf::event_based_actor::cleanup(std::move(reason), host);
    on_cleaned_up();
    return cleaned;
  }

 protected:
  virtual void on_cleaned_up() = 0;
};

// An actor of class C, spawned as `system.spawn<C, caf::lazy_init>(xs...)` spawns it, without
// making the system's logger the calling thread's current one first. With a current logger,
// CAF's launch notes the new actor's id as the thread's in the logger's table and puts the old
// one back, each under the table's process-wide spin lock (CAF_PUSH_AID, even in a build that
// logs nothing, as Debian's is): threads that spawn many actors at once would meet at that
// lock's line for every actor. On a thread that has never spawned through the system there is
// none, and nothing is noted.
template <class C, class... Ts>
caf::actor spawn_quietly(caf::actor_system& system, Ts&&... xs) {
#ifdef CAF_ENABLE_ACTOR_PROFILER
  // A CAF built with its actor profiler tells the profiler of each spawn; only spawn() does.
  return system.spawn<C, caf::lazy_init>(std::forward<Ts>(xs)...);
#else
  caf::actor_config config;
  config.host = system.dummy_execution_unit();
  auto actor = caf::make_actor<C, caf::actor>(system.next_actor_id(), system.node(), &system, config,
                                              std::forward<Ts>(xs)...);
  static_cast<C*>(caf::actor_cast<caf::abstract_actor*>(actor))->launch(config.host, /*lazy=*/true, /*hide=*/false);
  return actor;
#endif
}

}  // namespace troupe
