#pragma once
// ParamShard: owns variables by name and applies reads and updates to them in place; what it
// takes is its contract, ShardActor, below.
// A handler that throws anything but the errors it answers with (a bug, std::bad_alloc) leaves
// the shard's state in doubt: the shard drops it and goes on, empty, under the same handle
// ("restarted in place"; the request fails with a runtime_error naming the variables lost, and
// the process's standard error says so), so its variables read as not initialised until the
// chief's Supervisor restores them.
// Synchronous replicas (ops/state/sync_replicas.hpp): accumulate_atom adds a replica's gradient,
// computed at global step local_step, to the variable's accumulator; a gradient of an older step
// than the accumulator's is dropped (and said so in the reply). The m-th gradient of a step
// applies the average of the m once, with the optimizer, and moves the accumulator to the next
// step. sync_step_atom is a replica's vote on the global-step variable `name`: the m-th vote for
// the current step increments it and answers every replica waiting on it; a vote for an older
// step is answered at once; a replica's second vote for a step counts once. While replicas wait,
// every vote tells each of them (wait_note_atom to the node that voted, with the vote's token)
// which replicas have voted and which are missing, so a hung step's report names them; a timer
// of the shard's own (armed for the earliest deadline) fails the waiting replicas once a step's
// votes have taken SyncVote::bound_ms since the first, naming the missing ones. Re-assigning a
// variable (its initializer, a restore) drops its accumulator; re-assigning the global step fails
// the replicas waiting on it (and undoes a stop).
// kind is a VariableUpdate: assign replaces (and creates) the value; add and sub change it in
// place. A read or a snapshot hands out the buffers themselves (no copy); an in-place update
// of a buffer that a reader still holds first copies it, the variable's and each optimizer
// slot's alike, so a value once read never changes under its reader: a checkpoint written
// from a snapshot while training goes on sees the values of the moment of the snapshot.
// A restore is one message, so no step sees half of it; it replaces values, slots and step
// counts (they were checked by the Saver before). A snapshot of an optimizer that has not yet
// run on a variable holds its initial slots (what its first update would create) and step 0.
// Errors (an uninitialised read, a dtype or shape that does not fit) come back in the reply.
#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <set>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/messages.hpp"

namespace troupe {

// The bytes the variables and their optimizer slots may take in the parameter shards of one
// process (a ps task's memory budget: troupe-node --variable-memory-mb). A variable that would
// pass it fails its assign (or its first optimizer step, for the slots) with resource_exhausted
// naming it, the bytes and the budget, so a table too large for one process is found at
// initialisation and split (ops::partitioned_variable) instead of taking the host's memory.
class VariableMemory {
 public:
  VariableMemory(int64_t limit_bytes, std::string owner) : limit_(limit_bytes), owner_(std::move(owner)) {}
  // Takes delta bytes (negative: gives them back); false, taking nothing, when the limit
  // would be passed. A limit of 0 takes everything.
  bool reserve(int64_t delta);
  int64_t used() const { return used_.load(); }
  int64_t limit() const { return limit_; }
  const std::string& owner() const { return owner_; }

 private:
  const int64_t limit_;
  const std::string owner_;  // "task ps:0", for the error
  std::atomic<int64_t> used_{0};
};

struct ParamShardState {
  std::shared_ptr<VariableMemory> memory;  // null: no budget
  std::unordered_map<std::string, Tensor> variables;
  // Per variable and optimizer ("w/adam"): the optimizer's slots and its step count.
  struct Slots {
    std::vector<Tensor> tensors;
    int64_t step = 0;
  };
  std::unordered_map<std::string, Slots> slots;
  // Synchronous replicas: a variable's gradients of one global step, summed until m arrive.
  struct Accumulator {
    int64_t step = -1;  // the global step it accumulates for; -1: none yet
    int count = 0;
    Tensor sum;
    OptimizerSpec spec;  // the last gradient's optimizer and rate: a step completed by a lower m
    double learning_rate = 0;
  };
  std::unordered_map<std::string, Accumulator> accumulators;
  // The replicas waiting on a global-step variable for the step after `step`.
  struct StepBarrier {
    struct Waiter {
      caf::typed_response_promise<ShardReply> promise;
      caf::actor node;  // the voter, told who is missing (wait_note_atom)
      uint64_t token = 0;
    };
    int64_t step = -1;
    int needed = 0;       // m, as the last vote's op and any lowering said
    std::set<int> voted;  // replicas whose vote for `step` is in (unknown ones: below -1, each apart)
    std::vector<Waiter> waiting;
    bool stopped = false;  // training ended: votes are answered at once
    std::chrono::steady_clock::time_point first_vote;  // of `step`, set when `voted` gets its first
    // Kept from step to step: the replicas as their votes named them, and the vote timer.
    int total = 0;
    std::map<int, std::string> tasks;
    std::chrono::milliseconds bound{0};
    // When the earliest sync_deadline_atom on its way is due, if one is (a later one may be too).
    std::optional<std::chrono::steady_clock::time_point> timer_due;
    // The next step: no votes yet (the replicas waiting are the caller's to answer or keep).
    void begin(int64_t next) {
      step = next;
      voted.clear();
    }
  };
  std::unordered_map<std::string, StepBarrier> barriers;
  // Per accumulator or global step: the m it takes now (sync_aggregate_atom), below its ops'.
  std::unordered_map<std::string, int> aggregate;
  static inline const char* name = "troupe.param_shard";
};

using ShardActor = caf::typed_actor<
    // Variables
    caf::replies_to<read_atom, std::string>::with<ShardReply>,  // {the current value}
    // (name, kind, value, validate_shape) -> {the new value}
    caf::replies_to<update_atom, std::string, int32_t, Tensor, bool>::with<ShardReply>,
    caf::replies_to<names_atom>::with<std::vector<std::string>>,  // the variables it holds
    // Optimizers: (name, spec, grad, learning_rate) -> {} after one step on the variable and its
    // slots; sparse: (name, spec, values, indices, learning_rate), the rows `indices` names
    // (apply_optimizer_to_rows).
    caf::replies_to<apply_atom, std::string, OptimizerSpec, Tensor, double>::with<ShardReply>,
    caf::replies_to<sparse_apply_atom, std::string, OptimizerSpec, Tensor, Tensor, double>::with<ShardReply>,
    // Checkpoints: every variable it holds, and the state of each wanted optimizer (variable,
    // spec) whose variable it holds; a restore answers {} once all of it is assigned.
    caf::replies_to<snapshot_atom, std::vector<OptimizerState>>::with<ShardContents>,
    caf::replies_to<restore_atom, ShardContents>::with<ShardReply>,
    // Synchronous replicas (below). (name, spec, grad, learning_rate, local_step, m) -> {int64 1
    // if the gradient was dropped (stale), 0 if accumulated}.
    caf::replies_to<accumulate_atom, std::string, OptimizerSpec, Tensor, double, int64_t, int32_t>::with<ShardReply>,
    // (name, local_step, m, vote) -> {the new global step} once m replicas voted for local_step;
    // or deadline_exceeded naming the replicas whose votes are missing, past the vote's bound.
    caf::replies_to<sync_step_atom, std::string, int64_t, int32_t, SyncVote>::with<ShardReply>,
    caf::reacts_to<sync_deadline_atom, std::string>,  // its own vote timer
    // (name, m) -> {m}: `name` completes a step with m gradients or votes (fewer than its ops
    // say), 0: as they say; a step with m already is completed at once.
    caf::replies_to<sync_aggregate_atom, std::string, int32_t>::with<ShardReply>,
    // (name) -> {the global step}: training has ended; every replica waiting, and every later
    // vote, is answered at once.
    caf::replies_to<sync_stop_atom, std::string>::with<ShardReply>>;

ShardActor::behavior_type param_shard(ShardActor::stateful_pointer<ParamShardState> self);
// A shard whose variables count against `memory` (shared by the shards of a process).
ShardActor::behavior_type budgeted_param_shard(ShardActor::stateful_pointer<ParamShardState> self,
                                               std::shared_ptr<VariableMemory> memory);

// The parameter shards of one session, and which of them holds each variable: round robin
// over the variables in the order the graph defines them (the k-th distinct shared name of a
// VariableV2 node goes to shard k % size()), so the consecutive parts of a partitioned
// variable land on consecutive shards and the same program always places a variable on the
// same shard. A name the graph does not define (yet) takes the next shard in the round.
// Thread-safe; the graph must not change while a name is being looked up (as for run()).
class ParamShards {
 public:
  // memory: the budget the shards' variables share; null for none.
  ParamShards(caf::actor_system& system, std::shared_ptr<const Graph> graph, int count,
              std::shared_ptr<VariableMemory> memory = nullptr);
  ~ParamShards();  // stops the shards
  ParamShards(const ParamShards&) = delete;
  ParamShards& operator=(const ParamShards&) = delete;

  int size() const { return int(shards_.size()); }
  const ShardActor& at(int index) const { return shards_.at(std::size_t(index)); }
  int index_of(const std::string& variable) const;
  const ShardActor& of(const std::string& variable) const { return at(index_of(variable)); }

 private:
  std::vector<ShardActor> shards_;
  std::shared_ptr<const Graph> graph_;
  // Guards index_, scanned_nodes_ and next_ (index_of, from any Session thread); nothing else
  // is locked or called out to while it is held.
  mutable std::mutex mutex_;
  mutable std::unordered_map<std::string, int> index_;
  mutable int scanned_nodes_ = 0;  // graph nodes [0, scanned_nodes_) have been assigned
  mutable int next_ = 0;
};

}  // namespace troupe
