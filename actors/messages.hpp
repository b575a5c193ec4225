#pragma once
// The messages that flow between Troupe's actors (docs/architecture.md, "The message that
// flows").
// Internal to actors/: includes CAF, so keep it out of public headers.
#include "actors/caf_internals.hpp"

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/tensor.hpp"
#include "ops/state/optimizer.hpp"

namespace troupe {

// Which step, which loop frame, which iteration a value belongs to. Frame 0 is the step's
// root frame; Enter derives a child frame's id from the parent tag and the loop's name, so
// every Enter of one loop invocation finds the same id; NextIteration counts the iteration up.
// What a frame is (its name, the tag it was entered from) is kept in the executable's
// FrameTable (actors/executor/frame_table.hpp), so a tag stays three plain words.
struct Tag {
  uint64_t step = 0;
  uint64_t frame = 0;
  int64_t iteration = 0;
  friend bool operator==(const Tag& a, const Tag& b) {
    return a.step == b.step && a.frame == b.frame && a.iteration == b.iteration;
  }
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, Tag& x) {
  return f(caf::meta::type_name("troupe.Tag"), x.step, x.frame, x.iteration);
}

// A tensor, or the mark that it was not computed (the untaken branch of a Switch).
struct Value {
  Tensor tensor;
  bool dead = false;
};

// Slot of a control input (and of the start signal a source node receives).
constexpr uint32_t kControlSlot = 0xffffffffu;

// What a step produced, or why it failed (and on which device a node failed, when one did).
struct StepResult {
  std::vector<Tensor> fetches;
  ErrorCode code = ErrorCode::ok;
  std::string message;
  std::string device;
};

// What a parameter shard answers.
struct ShardReply {
  Tensor value;
  ErrorCode code = ErrorCode::ok;
  std::string message;
};

// One optimizer's state for one variable in a parameter shard: its slots (spec.num_slots() of
// them, shaped like the variable) and how many updates it has applied.
struct OptimizerState {
  std::string variable;
  OptimizerSpec spec;
  std::vector<Tensor> slots;
  int64_t step = 0;
};

// A synchronous replica's vote (sync_step_atom, actors/state/param_shard.hpp): who votes, and how long
// it may wait for the others.
struct SyncVote {
  int32_t replica = -1;        // 0 <= replica < total_replicas; -1: not known (counted apart)
  int32_t total_replicas = 0;  // n; 0: not known
  std::string task;            // the replica's task ("worker:1"), for messages; "": not known
  int64_t bound_ms = 0;        // how long the step's votes may take after the first; 0: no bound
  uint64_t token = 0;          // the voter's step id, given back in its wait notes (wait_note_atom)
};

// A parameter shard's variables and optimizer states: what a snapshot replies (sharing the
// buffers) and what a restore assigns.
struct ShardContents {
  std::vector<std::pair<std::string, Tensor>> variables;
  std::vector<OptimizerState> optimizers;
};

// Where an awaited value comes from: a node of the waiting node's own partition (device empty),
// or, for a _Recv, the node on `device` whose value it waits for (actors/trace/wait_chain.hpp).
struct WaitSource {
  std::string device;
  std::string node;
  std::string tensor;  // "next:0"
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WaitSource& x) {
  return f(caf::meta::type_name("troupe.WaitSource"), x.device, x.node, x.tensor);
}

// One line of "who waits on whom": a node holding a tag whose inputs have not all arrived.
struct WaitReport {
  std::string node;
  Tag tag;
  int received = 0;
  int expected = 0;
  std::vector<std::string> missing;  // the inputs still awaited
  std::vector<WaitSource> sources;   // of the missing inputs that nodes produce
  // Not a node's own report: a node no input of which has come, whose value another device
  // waits for, with the waiting nodes it depends on as its sources (ask_waits).
  bool inferred = false;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WaitReport& x) {
  return f(caf::meta::type_name("troupe.WaitReport"), x.node, x.tag, x.received, x.expected, x.missing, x.sources,
           x.inferred);
}

using input_atom = caf::atom_constant<caf::atom("input")>;
using abort_atom = caf::atom_constant<caf::atom("abort")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using read_atom = caf::atom_constant<caf::atom("read")>;
using update_atom = caf::atom_constant<caf::atom("update")>;
using waits_atom = caf::atom_constant<caf::atom("waits")>;
using names_atom = caf::atom_constant<caf::atom("names")>;
using apply_atom = caf::atom_constant<caf::atom("apply")>;
using sparse_apply_atom = caf::atom_constant<caf::atom("sparseapp")>;
using snapshot_atom = caf::atom_constant<caf::atom("snapshot")>;
using restore_atom = caf::atom_constant<caf::atom("restore")>;
using accumulate_atom = caf::atom_constant<caf::atom("accum")>;
using sync_step_atom = caf::atom_constant<caf::atom("syncstep")>;
using sync_stop_atom = caf::atom_constant<caf::atom("syncstop")>;
using sync_aggregate_atom = caf::atom_constant<caf::atom("syncaggr")>;
// (sync_deadline_atom, name): a parameter shard's own timer for the votes on global step `name`.
using sync_deadline_atom = caf::atom_constant<caf::atom("syncdead")>;
// (wait_note_atom, step, text): what an actor a node waits on says the node waits for in step
// `step` (a global step's shard: whose votes are still missing); the node's waits report it.
using wait_note_atom = caf::atom_constant<caf::atom("waitnote")>;

// Sends input(tag, slot, value) without a sender. From inside an actor pass its context():
// the receiver is then scheduled on the sending worker (CAF's anon_send, which has no
// context, hands every woken actor to the central round-robin queue instead).
inline void send_input(caf::execution_unit* context, const caf::actor& to, const Tag& tag,
                       uint32_t slot, Value value) {
  enqueue_from(context, to, input_atom::value, tag, slot, std::move(value));
}

// Sends `xs...` as `self`, a typed actor, to `to`, an actor of no declared contract (a node, an
// outbox, a master's step): CAF lets a typed actor send() only to typed ones.
template <class Self, class... Ts>
void send_untyped(Self self, const caf::actor& to, Ts&&... xs) {
  caf::send_as(caf::actor_cast<caf::actor>(self), to, std::forward<Ts>(xs)...);
}

}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::Value)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::OptimizerSpec)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::StepResult)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::ShardReply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::SyncVote)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::ShardContents)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<troupe::OptimizerState>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::Tensor)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<troupe::Tensor>)
