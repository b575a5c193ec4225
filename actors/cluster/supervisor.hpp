#pragma once
// Training that outlives a lost parameter server (docs/cluster.md, "When a parameter server dies"). Every
// process of a job runs its training steps through a Supervisor. When a step fails because a task
// was lost (unavailable) or a variable it uses is not initialised (failed_precondition: the task
// came back empty), the supervisor finds which tasks run a new process (their incarnation changed;
// a lost task is reconnected, for at most `grace`), and
//   - in the chief (given a Saver and a checkpoint directory), restores the variables placed on
//     those tasks (and, for a variable not initialised on a task whose process it has not seen
//     change, on the task the error names: one restarted while this chief was away) alone, with
//     their optimizer slots, from the newest checkpoint there
//     (Saver::restore_tasks): the other tasks' variables keep their values and the job loses only
//     the updates of those variables since that checkpoint;
//   - in another worker, waits for the chief to have done so;
// then runs the step again. The recovery is reported once the first step after it has run (what
// died, where it runs again, the step restored to, the global steps lost, the times). A step that
// fails otherwise, a task not back within `grace`, or a variable lost with no checkpoint to
// restore it from (a restarted task that held none, such as a worker, needs none), throws,
// naming first the task that did not come back and how long it was waited for. Who restarts a killed task is outside: troupe-launch
// --restart-ps, a service manager, or a person; the supervisor only waits for it.
// One thread at a time calls run(); the supervisor holds no lock while a step runs.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "actors/state/saver.hpp"
#include "actors/session.hpp"
#include "core/error.hpp"

namespace troupe {

struct Recovery {
  std::vector<std::string> tasks;      // what died ("ps:1"), and where each runs again
  std::vector<std::string> addresses;  // ("127.0.0.1:2222")
  std::vector<std::string> spares;     // per task, the spare that took it over ("spare:0"), or ""
  std::string cause;                   // the error of the step that saw the loss
  std::string checkpoint;              // what the chief restored from ("": nothing restored here)
  int64_t restored_step = 0;           // that checkpoint's global step
  int64_t lost_steps = 0;              // global steps past it whose updates of those variables were lost
  std::size_t variables = 0;           // variables restored
  double seconds_back = 0;             // from the failed step to every task reachable again
  double seconds_restored = 0;         // ... to the variables restored (the chief)
  double seconds_to_step = 0;          // ... to the first step that ran again
  std::string describe() const;        // one line, for a log
};

struct SupervisorOptions {
  // The chief's checkpoints, what it restores a restarted task's variables from; empty: none
  // (a task that comes back without its variables then fails the job at once, data_loss).
  std::string checkpoint_dir;
  // How long a lost task may take to come back, before the chief gives a lost ps task to a spare
  // (a worker waits twice as long and 10 s more: the chief restores after, or moves it).
  std::chrono::milliseconds grace{30000};
  // Told of each recovery once the first step after it ran; default: nothing.
  std::function<void(const Recovery&)> on_recovery;
  // Synchronous replicas (the chief's; SyncTrainOp): a thread watches the replicas' tasks (every
  // 250 ms: the master sees a killed process at once and a hung one after the connection
  // timeout), and while fewer than m are alive, steps complete with the gradients of the replicas
  // alive (set_aggregate fed their number); when they are back, with m again. With backups
  // (n > m) nothing changes until fewer than m are left. Each change is told to on_replicas.
  struct SyncReplicas {
    std::vector<std::string> tasks;  // every replica's task, "worker:0" ... (this process's too)
    int replicas_to_aggregate = 1;   // m
    Output aggregate;                // SyncTrainOp::aggregate and set_aggregate
    Node* set_aggregate = nullptr;
    // The job's end, where known: once the global step (global_step, a read) has reached
    // last_step, replicas that leave have finished, not been lost. m is not lowered for them;
    // `stop` (SyncTrainOp::stop) runs instead, so a step this process began on a global step it
    // read before the last one was applied goes on at once without applying (with m lowered it
    // would complete alone, one step past the end), and the watch ends.
    Output global_step;
    int64_t last_step = 0;  // 0: no end known
    Node* stop = nullptr;
  };
  std::optional<SyncReplicas> sync;
  // "worker:2 lost: synchronous steps now complete with 2 of 3 gradients until it is back";
  // default: standard error.
  std::function<void(const std::string&)> on_replicas;
  // Told while a lost task is waited for, once when the wait begins and every 10 s after
  // ("waiting for task ps:0 at 127.0.0.1:2222 to come back (12 s of 30)"); default: standard error.
  std::function<void(const std::string&)> on_waiting;
};

class Supervisor {
 public:
  // `saver`: the chief's (it restores from options.checkpoint_dir); nullptr in another worker.
  // Asks every task of the session's cluster who it is now (throws unavailable, naming a task it
  // cannot reach). Only the tasks the session's steps run on are waited for when one is lost: a
  // worker of another process that is away holds up no recovery.
  Supervisor(Session& session, Saver* saver, SupervisorOptions options);
  ~Supervisor();
  Supervisor(const Supervisor&) = delete;
  Supervisor& operator=(const Supervisor&) = delete;

  // Runs `step` (steps on the session) until it succeeds or fails in a way no recovery helps.
  template <class Step>
  auto run(Step&& step) -> decltype(step()) {
    for (;;) {
      try {
        if constexpr (std::is_void_v<decltype(step())>) {
          step();
          succeeded();
          return;
        } else {
          auto out = step();
          succeeded();
          return out;
        }
      } catch (const Error& e) {
        recover(e);
      }
    }
  }
  // Stops the replicas' watch (SupervisorOptions::sync), e.g. once training has ended and the
  // other replicas leave; the destructor does too.
  void stop_watching_replicas();
  // The newest global step the job has seen: the updates after a restored checkpoint are counted from it.
  void saw_global_step(int64_t step);
  const std::vector<Recovery>& recoveries() const;

 private:
  void recover(const Error& failed);  // returns to run the step again; throws when it cannot help
  void try_to_recover(const Error& failed);
  void succeeded();
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe
