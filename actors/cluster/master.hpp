#pragma once
// The master of a cluster session (Session with SessionOptions::target, docs/cluster.md): it
// learns the cluster from the target member, connects to every task (their devices and
// incarnations), and for each signature places the graph over all tasks' devices, cuts it into
// partitions, and registers each task's share with that task's worker (RegisterGraph, once per
// signature). A step is one RunGraph per task, all at once; the step ends when every task has
// answered, or fails at the first error, at the loss of a task (CAF's heartbeats and connection
// timeout: a killed or hung process is seen within the connection timeout) or at the step's
// deadline, and is then aborted on every other task.
//
// A lost task fails the step in flight naming the task, its address and what the step was
// waiting for from it; later steps try to reconnect (bounded) and fail at once with the same
// cause while it is away. When it is back (a new incarnation), every signature is registered
// anew, so values from the old incarnation are never taken for the new one's.
//
// The master runs in an actor system of its own with CAF's network layer, apart from the
// process's Runtime: a program may run a local Session and a cluster Session side by side.
// Thread-safe: steps, descriptions and recovery run on any threads at once. Its lock order (in
// master.cpp, above Master::Impl): no lock is held while a task is asked anything, but the one
// that makes connects one at a time.
// Internal to actors/.
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/cluster/worker.hpp"
#include "actors/messages.hpp"
#include "actors/runtime.hpp"
#include "actors/session.hpp"
#include "graph/graph.hpp"
#include "graph/placement.hpp"

namespace troupe {

struct MasterOptions {
  NetworkOptions network;
  // How long the first connection to every task may take (tasks still starting are retried).
  std::chrono::milliseconds startup_timeout{10000};
  bool allow_soft_placement = true;
  bool float16_transfer = false;  // every float32 value between tasks crosses as float16
  std::optional<PlacementOptions::Policy> placement_policy;
  // Told while the master waits for a task at its start: when the wait begins and every
  // kWaitingNotice after ("waiting for task ps:0 at 127.0.0.1:2222 (0 s): ..."); default:
  // standard error.
  std::function<void(const std::string&)> on_waiting;
};


// One traced step of a cluster (Master::take_trace): every task's events, the process each
// task is in the trace, and the tasks that did not answer.
struct TraceParts {
  struct Process {
    int pid = 0;
    std::string task;     // "worker:1"
    std::string address;  // "127.0.0.1:4001"
    int64_t clock_offset_ns = 0, clock_error_ns = -1;  // its clock minus the master's; -1: unknown
  };
  std::vector<std::string> lines;
  std::vector<Process> processes;
  std::vector<std::string> missing;
};

class Master {
 public:
  // target: "troupe://host:port", the address of any member. Throws invalid_argument for a
  // malformed target, unavailable when a task cannot be reached in time (naming it).
  Master(const std::string& target, const MasterOptions& options);
  ~Master();  // deregisters every signature (bounded) and stops the master's actors
  Master(const Master&) = delete;
  Master& operator=(const Master&) = delete;

  struct Signature;
  std::shared_ptr<Signature> prepare(const Graph& graph, const std::vector<Endpoint>& feeds,
                                     const std::vector<Endpoint>& fetches, const std::vector<int>& targets);
  // `traced`: every task traces its share of the step (core/trace.hpp); take_trace gets it.
  StepResult run(Signature& signature, uint64_t step, std::vector<Tensor> feeds, std::chrono::milliseconds deadline,
                 bool traced = false);
  // Traced steps' events from every task of the signature, as Chrome trace JSON objects on
  // the master's clock (times from `base_ns`, each task's shifted by its clock offset), with the
  // events of no step between `from_ns` and `to_ns`; a process (pid) per task.
  TraceParts take_trace(Signature& signature, const std::vector<uint64_t>& steps, int64_t from_ns, int64_t to_ns,
                        int64_t base_ns);

  // What step `step` of `signature` (running now) waits for on every task: the stuck nodes
  // followed across tasks, then each task's waiting nodes; empty when no node waits. Asks
  // every task at once, each answer awaited for a bounded time (timeouts::late_step_report).
  std::string describe_step(Signature& signature, uint64_t step);
  // The same for every step in run() now, a paragraph each ("step 3: stuck: ...").
  std::string describe_running();

  // Each task's transfer counters (Session::transfer_stats).
  std::vector<TaskTransfers> transfer_stats() const;

  // Every task of the cluster ("ps:0"), or the tasks `only` names, and its worker, for the Saver
  // and the Supervisor (a lost task is connected anew, bounded; throws unavailable naming the
  // first task that cannot be reached, invalid_argument for a task the cluster lacks), and the
  // task unconstrained nodes (and variables) are placed on.
  struct TaskWorker {
    std::string task;
    WorkerActor worker;
    uint64_t incarnation = 0;  // the task's process: a restarted one has another
    std::string address;
  };
  std::vector<TaskWorker> task_workers(const std::vector<std::string>& only = {});
  // The tasks this master's signatures run on: what its steps need.
  std::vector<std::string> tasks_in_use() const;
  // The index of `task` among the cluster's tasks; invalid_argument naming them when it lacks it.
  int task_index(const std::string& task) const;
  // Whether `task` ("worker:2") is up: true unless the master saw it lost (its process died or
  // stopped answering heartbeats), and then true once it is connected again (one attempt,
  // bounded as connecting is) to the same process. Reconnected to a new process (restarted
  // while the attempt waited), it says false once: it was lost, and the next call says it is
  // back. Throws invalid_argument for a task the cluster lacks.
  bool task_alive(const std::string& task);
  // A ps task lost for good gets a spare: the first task of the "spare" job that answers takes
  // it over (its process becomes that task, empty; every member is told where it runs now), and
  // the task is connected there. Returns (the task, the spare), or nullopt when no ps task is
  // lost or no spare could take it over.
  std::optional<std::pair<std::string, std::string>> take_over_with_spare();
  std::string target_task() const;
  caf::actor_system& system();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe
