#pragma once
// Synchronous replicas with backup workers (TensorFlow's SyncReplicasOptimizer, OSDI'16 §4.4):
// each of total_replicas workers runs the same graph (between-graph replication, variables on
// the ps tasks); for every global step the parameter shards aggregate the gradients of the
// first replicas_to_aggregate (m) replicas to send theirs, apply their average once, and let
// every replica go on to the next step. With m < n the slowest n - m replicas of a step are
// backups: their gradients, computed for a step that has passed, are dropped and counted,
// never applied, so a straggler does not slow the job.
//
//   auto global_step = ops::global_step(ps_scope);
//   SyncReplicasOptimizer sync(Optimizer::momentum(0.01, 0.9),
//                              {.replicas_to_aggregate = 2, .total_replicas = 3, .replica = task_index});
//   SyncTrainOp train = sync.minimize(scope, loss, global_step.value);
//   auto out = session.run({loss, train.next_step}, {train.op});  // waits for the step's release
//
// How it runs (actors/state/param_shard.hpp): the step reads the global step (its "local step");
// every variable's AccumulateGradient sends the gradient tagged with it to the variable's shard,
// which drops it if the shard's accumulator has moved past that step, else sums it, and the
// m-th of the step applies the average with the optimizer (slots, learning rate, as
// Optimizer::apply_gradients would). Once every variable has answered, the replica's
// SyncReplicasStep votes on the global step's shard: the m-th vote of the step increments the
// global step (so it counts applied updates) and answers every replica waiting; a replica whose
// vote is late is answered at once. Since a replica votes only after all its gradients were
// answered, every accumulator has applied step s before the global step passes s.
//
// Dropped gradients: a replica's step whose gradients came too late (any of its variables'
// accumulators had passed the step; then, in practice, all of them) counts as one dropped
// gradient, added to the replica's own int64 counter variable "sync_replicas/dropped_gradients/replica_<k>", placed like any variable
// (a ps under replica_device_setter) and initialised by the global initializer: every replica's
// graph defines all n counters, so the chief reads them all (dropped_counters).
//
// The chief initializes the variables (the global step last); the replicas wait until it is.
// A replica waits for the others' votes for at most vote_timeout after the step's first vote
// (or the step's deadline, RunOptions::timeout or SessionOptions::operation_timeout, if that
// comes first): with fewer than m replicas alive, the step then fails (deadline_exceeded) naming
// the replicas whose votes are missing ("... missing worker:1"), unless m is lowered first
// (set_aggregate below; the chief's Supervisor does it when a replica's task is lost). While a
// step waits, its slow-step report (SessionOptions::slow_step_report), Session::describe_waiting
// and troupe-node --status name the replicas in and missing.
#include <chrono>
#include <string>
#include <vector>

#include "ops/state/optimizer.hpp"

namespace troupe {

struct SyncReplicasOptions {
  int replicas_to_aggregate = 1;  // m: gradients averaged per global step
  int total_replicas = 1;         // n: workers running the training graph (n - m backups)
  int replica = 0;                // this worker's index, 0 <= replica < n
  // How long a step's votes may take after its first; zero: no bound (then only the step's
  // deadline bounds the wait). Five minutes: longer than any step of a live replica, including
  // the first, which waits for the slowest replica's start (actors/timeouts.hpp lists it).
  std::chrono::milliseconds vote_timeout{std::chrono::minutes(5)};
  // This replica's task in messages ("worker:1"); empty: the job and task its gradients are
  // placed on (replica_device_setter's worker_device), else "replica <k>".
  std::string replica_task;
};

struct SyncTrainOp {
  Node* op = nullptr;       // the target: accumulate every gradient, count the dropped, vote, wait
  Output next_step;         // the global step once this replica may go on (a fetch; needs op)
  Output dropped;           // int64: 1 if this step's gradient was dropped, else 0 (fetch with op)
  std::vector<Output> dropped_counters;  // per replica: its dropped gradients so far (reads)
  // Run once when training ends (by the chief): a replica waiting for a step that will not
  // come, or voting later, goes on at once (TensorFlow closes its token queue). Without it, a
  // straggler that starts a step after the others stopped waits until its deadline.
  Node* stop = nullptr;
  // Fewer replicas while some are lost (no backups to cover them): run set_aggregate with
  // `aggregate` fed an int64 m' < m, and every accumulator and the global step complete a step
  // with m' gradients and votes (a step waiting with m' already completes at once); feed 0 to go
  // back to m. The chief's Supervisor does it (SupervisorOptions::sync).
  Output aggregate;
  Node* set_aggregate = nullptr;
};

class SyncReplicasOptimizer {
 public:
  // Throws invalid_argument unless 1 <= m <= n and 0 <= replica < n.
  SyncReplicasOptimizer(Optimizer optimizer, SyncReplicasOptions options);

  // global_step: the int64 scalar variable the replicas share (ops::global_step). The
  // variables: the trainable ones by default.
  SyncTrainOp minimize(const Scope& scope, Output loss, Output global_step, std::vector<Output> variables = {}) const;
  SyncTrainOp apply_gradients(const Scope& scope, const std::vector<Output>& grads,
                              const std::vector<Output>& variables, Output global_step) const;

  const SyncReplicasOptions& options() const { return options_; }

 private:
  Optimizer optimizer_;
  SyncReplicasOptions options_;
};

}  // namespace troupe
