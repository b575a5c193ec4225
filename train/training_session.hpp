#pragma once
// TrainingSession: the training loop's session, the same model code on one process or on a
// cluster in any strategy (docs/api.md, "Training on a cluster from your own program").
//
//   auto where = train::where_am_i(cluster_flag, task_flag);     // or TF_CONFIG, or alone
//   train::TrainingOptions options{.strategy = train::Strategy::sync_replicas,
//                                  .checkpoint_dir = "ckpt", .last_step = 2000};
//   train::TrainingSession session(where, Optimizer::adam(1e-3), [](const Scope& s) {
//     auto x = ops::placeholder(s.with_op_name("x"), DType::float32, PartialShape{-1, 8});
//     auto y = ops::placeholder(s.with_op_name("y"), DType::int32, PartialShape{-1});
//     ... layers ...
//     return train::Model{.loss = loss, .inputs = {x, y}};
//   }, options);
//   session.add_hook(std::make_shared<train::CheckpointHook>(train::CheckpointHook::every_steps(200)));
//   auto input = my_pipeline.shard(where.num_workers(), where.worker_index()).batch(64).repeat(-1).begin();
//   session.train(*input);                                         // steps until a stop, then close()
//
// What it does for each strategy (Strategy below):
//   - builds the graph: model_fn under the strategy's scope (alone or all-reduce: this process;
//     parameter servers: replica_device_setter, variables and slots on the ps tasks), the global
//     step, and the optimizer's update (SyncReplicasOptimizer for sync_replicas; for all-reduce,
//     the gradients averaged over the workers by ring all-reduce before they are applied);
//   - on a cluster, hosts this task's cluster member in this process (what troupe-node runs) and
//     connects to the other tasks, waiting for them at most startup_timeout;
//   - the chief (alone, or worker:0) checks that checkpoint_dir can be written, then restores the
//     newest checkpoint (or restore_from) or initialises, the global step last; the other workers
//     wait for it at most init_timeout, saying so every 10 s; with all-reduce every worker
//     restores or initialises and then takes the chief's weights, so all start from the same bits;
//   - with parameter servers, every worker runs its steps under a Supervisor
//     (actors/cluster/supervisor.hpp): a ps task that dies and comes back gets its variables back from
//     the chief's newest checkpoint and the job goes on; sync replicas' chief also watches the
//     replicas, so a lost worker does not stop the steps.
// Errors name what and where: a task not in the spec, a strategy the spec cannot run (no ps
// job), a worker that waited too long for the chief, a diverging loss with its global step.
//
// One thread uses a TrainingSession. The hooks run on that thread, in the order they were added.
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "actors/session.hpp"
#include "graph/scope.hpp"
#include "ops/data/pipeline.hpp"
#include "ops/state/optimizer.hpp"
#include "train/cluster_config.hpp"

namespace troupe::train {

enum class Strategy {
  local,              // one process (a cluster's spec is refused)
  parameter_servers,  // asynchronous: each worker applies its gradients on the ps tasks at once
  sync_replicas,      // synchronous: each global step averages the first workers - backup_workers gradients
  allreduce,          // no ps: gradients summed by ring all-reduce among the workers, averaged, applied on each
};
// "local", "async" (or "parameter_servers"), "sync" (or "sync_replicas"), "allreduce";
// invalid_argument naming the others for anything else.
Strategy parse_strategy(const std::string& name);
const char* name_of(Strategy strategy);  // "local", "async", "sync", "allreduce"

// What model_fn builds: the loss to minimise, the placeholders each step's batch feeds (in the
// order of the batch's components), and the evaluation's metrics.
struct Model {
  Output loss;                  // a float scalar
  // Placeholders, fed the batch's components in this order. Empty: the graph reads its own
  // input (a queue a Prefetcher fills, a reader op), and step() takes an empty batch.
  std::vector<Output> inputs;
  int64_t examples_per_step = 0;  // with no inputs: the examples a step reads (for examples/s)
  // Scalars an evaluation averages over its batches ("accuracy"): computed from eval_inputs
  // (placeholders the evaluation input feeds; empty: `inputs`), or from a reader in the graph
  // with no feed at all (EvaluationHook without an input).
  std::vector<std::pair<std::string, Output>> metrics;
  std::vector<Output> eval_inputs;
};
using ModelFn = std::function<Model(const Scope& scope)>;

struct TrainingOptions {
  // How the workers train together; alone (where.local()), every strategy trains this process.
  Strategy strategy = Strategy::parameter_servers;
  int backup_workers = 0;          // sync_replicas: a step does not wait for the slowest K
  bool float16_allreduce = false;  // allreduce: float32 gradients cross as float16 (lossy)
  // Global steps of the whole job (the sync strategy needs it to end its replicas cleanly);
  // 0: until a hook or request_stop() stops.
  int64_t last_step = 0;
  // Checkpoints: where the chief saves (CheckpointHook), restores at its start, and restores a
  // restarted ps task from. Empty: none (a ps task lost with its variables fails the job).
  std::string checkpoint_dir;
  std::string restore_from;  // a checkpoint of checkpoint_dir by name (ckpt-N); empty: the newest
  int max_to_keep = 5;
  // How a program's user names restore_from, for the error a damaged checkpoint gives
  // ("run again with --restore-from ckpt-100").
  std::string restore_from_flag = "--restore-from";
  // This worker was started again mid-job: it joins at the current global step (no
  // initialisation, no restore; the chief too). Not with allreduce (its ring is formed once).
  bool rejoin = false;
  int threads = 0;  // SessionOptions::threads
  std::chrono::milliseconds startup_timeout{60000};   // every task of the cluster answering
  std::chrono::milliseconds init_timeout{120000};     // a worker waiting for the chief's initialisation
  std::chrono::milliseconds step_timeout{120000};     // one step (a sync step waits for the others)
  std::chrono::milliseconds recovery_grace{30000};    // a lost ps task coming back (SupervisorOptions::grace)
  std::string trace_file;  // SessionOptions::trace.file (the chief's): steps traced by RunOptions::trace
  // Where the session's events go (resumed, waiting for the chief, recovered, replicas lost),
  // one line each; default: standard output, prefixed with the task ("worker:1: ...").
  std::function<void(const std::string&)> on_message;
  // The connections' log (peers connected and lost, tasks waited for); default: standard error,
  // prefixed with the program and the task.
  std::function<void(const std::string&)> on_network;
};

// What one step did.
struct StepInfo {
  int64_t global_step = 0;  // after it
  int64_t local_step = 0;   // this process's steps so far, it included
  float loss = 0;
  int64_t examples = 0;     // the batch's rows
  int64_t dropped = 0;      // sync_replicas: this worker's gradients dropped by the step (late)
};

// Batches one global step consumes under `options` (TrainingSession::replicas_per_step), and the
// global steps that take `epochs` passes over `examples_per_epoch` examples in batches of `batch`
// per worker: known before the session is made, for TrainingOptions::last_step. A number of
// backup workers that leaves no replica counts as one here; the session refuses it.
int replicas_per_step(const ClusterConfig& where, const TrainingOptions& options);
int64_t steps_for_epochs(const ClusterConfig& where, const TrainingOptions& options, int epochs,
                         int64_t examples_per_epoch, int64_t batch);

class TrainingSession;

// Something that happens around the steps. begin() runs before the first step (after the
// session is ready), after_step() after each, end() at close(); an exception from any fails
// the training with it. Hooks run on the chief and on every other worker: a hook that belongs to
// the chief alone checks session.is_chief().
class Hook {
 public:
  virtual ~Hook() = default;
  virtual void begin(TrainingSession&) {}
  virtual void after_step(TrainingSession&, const StepInfo&) {}
  virtual void end(TrainingSession&) {}
};

class TrainingSession {
 public:
  // Builds, connects, and initialises, restores or waits (above). Throws Error naming what failed.
  TrainingSession(const ClusterConfig& where, Optimizer optimizer, ModelFn model_fn, TrainingOptions options = {});
  ~TrainingSession();
  TrainingSession(const TrainingSession&) = delete;
  TrainingSession& operator=(const TrainingSession&) = delete;

  const ClusterConfig& where() const;
  const TrainingOptions& options() const;
  Strategy strategy() const;  // local alone, else options().strategy
  bool is_chief() const;
  int num_workers() const;
  // Batches one global step consumes: 1 (local, parameter_servers), workers - backup_workers
  // (sync_replicas), workers (allreduce).
  int replicas_per_step() const;
  const Model& model() const;

  // The global step: where the session started (restored, or read when it joined), then after
  // each step.
  int64_t global_step() const;
  // The checkpoint the chief restored at its start ("" when it initialised).
  const std::string& resumed_from() const;
  // Where this worker's input resumes, in a sequence of `batches_per_epoch` batches per pass:
  // alone, exactly where the restored step left it; on a cluster, this worker's share of the
  // global steps so far.
  data::Position input_position(int64_t batches_per_epoch) const;

  // Builds the step's executables now (a reader op loads its files) instead of at the first
  // step, and the metrics' where they are fed Model::eval_inputs or the model has no inputs:
  // for a program that times its steps.
  void prepare();

  void add_hook(std::shared_ptr<Hook> hook);
  // One step on `batch` (its components feed Model::inputs), then every hook's after_step.
  // Throws aborted for a loss that is not finite, naming the global step.
  StepInfo step(const data::Element& batch = {}, const RunOptions& run = {});
  bool should_stop() const;  // last_step reached, or request_stop()
  void request_stop();
  // begin(), steps on `input` until should_stop() (or the input ends), then close().
  void train(data::Iterator& input);
  // The hooks' begin(); train() and the first step() call it when it has not run.
  void begin();
  // Ends the training: a sync job's replicas are let go, then every hook's end() (the final
  // checkpoint, evaluation, summary). Once; the destructor does not (it only disconnects).
  void close();

  // Runs on the session, through the supervisor where there is one (a lost ps task is waited
  // for): evaluations and reads of the chief.
  std::vector<Tensor> run(const FeedList& feeds, const std::vector<TensorName>& fetches);
  // The chief's checkpoints (checkpoint_dir must be set): save() through the supervisor;
  // save_async() in the background (one save at a time is the caller's to keep).
  std::string save();
  std::future<std::string> save_async();
  // True when there is a supervisor: a save's unavailable or failed_precondition may mend.
  bool supervised() const;
  // sync_replicas: every worker's gradients dropped so far (empty otherwise).
  std::vector<int64_t> dropped_per_worker();
  // A fingerprint of the trainable variables' bytes (core/fingerprint.hpp): with all-reduce,
  // the same on every worker.
  uint64_t weights_fingerprint();
  // Scalars for TensorBoard and the like: hooks report, sinks (TensorBoardHook) receive.
  void report_scalar(const std::string& tag, double value, int64_t step);
  void add_scalar_sink(std::function<void(const std::string& tag, double value, int64_t step)> sink);
  // The events' line (on_message).
  void message(const std::string& line);
  Session& session();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace troupe::train
