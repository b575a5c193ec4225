#pragma once
// The messages that flow between Troupe's actors (ARCHITECTURE.md, "The message that flows").
// Internal to actors/: includes CAF, so keep it out of public headers.
#include <caf/all.hpp>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "core/tensor.hpp"
#include "ops/state/optimizer.hpp"

namespace troupe {

struct Frame;

// Which step, which loop frame, which iteration a value belongs to. Frame 0 is the step's
// root frame. Enter derives a child frame's tag from its parent's (child_tag), Exit returns
// to the parent (parent_tag), NextIteration counts the iteration up. Tags compare by step,
// frame id and iteration; `info` carries the frame's name and parent tag (null in the root
// frame), shared by reference, so a tag stays three words and a pointer.
struct Tag {
  uint64_t step = 0;
  uint64_t frame = 0;
  int64_t iteration = 0;
  std::shared_ptr<const Frame> info;
  friend bool operator==(const Tag& a, const Tag& b) {
    return a.step == b.step && a.frame == b.frame && a.iteration == b.iteration;
  }
};

// One invocation of a loop: its frame name and the tag of the parent it was entered from.
struct Frame {
  std::string name;
  Tag parent;
};

// The frame id of loop `name_hash` entered from `parent`: a pure function, so every Enter of
// one loop invocation derives the same id independently.
uint64_t child_frame_id(const Tag& parent, uint64_t name_hash);
// Iteration 0 of the frame `name` entered from `parent`.
Tag child_tag(const Tag& parent, const std::string& name, uint64_t name_hash);
// The tag Exit returns to. Throws internal for a root-frame tag.
const Tag& parent_tag(const Tag& tag);
// "" in the root frame; else "in frame 'f' iteration k (in frame 'g' iteration j)".
std::string describe_frame(const Tag& tag);

// A tensor, or the mark that it was not computed (the untaken branch of a Switch).
struct Value {
  Tensor tensor;
  bool dead = false;
};

// Slot of a control input (and of the start signal a source node receives).
constexpr uint32_t kControlSlot = 0xffffffffu;

// What a step produced, or why it failed.
struct StepResult {
  std::vector<Tensor> fetches;
  ErrorCode code = ErrorCode::ok;
  std::string message;
};

// What a parameter shard answers.
struct ShardReply {
  Tensor value;
  ErrorCode code = ErrorCode::ok;
  std::string message;
};

// One line of "who waits on whom": a node holding a tag whose inputs have not all arrived.
struct WaitReport {
  std::string node;
  Tag tag;
  int received = 0;
  int expected = 0;
  std::vector<std::string> missing;  // the inputs still awaited
};

using input_atom = caf::atom_constant<caf::atom("input")>;
using abort_atom = caf::atom_constant<caf::atom("abort")>;
using run_atom = caf::atom_constant<caf::atom("run")>;
using read_atom = caf::atom_constant<caf::atom("read")>;
using update_atom = caf::atom_constant<caf::atom("update")>;
using waits_atom = caf::atom_constant<caf::atom("waits")>;
using names_atom = caf::atom_constant<caf::atom("names")>;
using apply_atom = caf::atom_constant<caf::atom("apply")>;

// Sends input(tag, slot, value) without a sender. From inside an actor pass its context():
// the receiver is then scheduled on the sending worker (CAF's anon_send, which has no
// context, hands every woken actor to the central round-robin queue instead).
inline void send_input(caf::execution_unit* context, const caf::actor& to, const Tag& tag,
                       uint32_t slot, Value value) {
  to->eq_impl(caf::make_message_id(), nullptr, context, input_atom::value, tag, slot,
              std::move(value));
}

}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::Tag)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::Value)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::OptimizerSpec)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::StepResult)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::ShardReply)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::WaitReport)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<troupe::WaitReport>)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::Tensor)
CAF_ALLOW_UNSAFE_MESSAGE_TYPE(std::vector<troupe::Tensor>)
