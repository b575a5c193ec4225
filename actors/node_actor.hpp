#pragma once
// NodeActor: one graph node of one Executable. Takes
//   (input_atom, Tag, slot, Value)  an input (or, at kControlSlot, a control signal) of a tag;
//   (abort_atom, step)              drop all state of a step that failed elsewhere;
//   (waits_atom)                    reply the tags held and the inputs still awaited.
// Per tag it keeps the inputs received so far; when all data and control inputs of a tag have
// arrived it fires: runs the kernel (or, for a variable op, asks the parameter shard) and sends
// each output to each consumer with the same tag, then forgets the tag. If any input is dead
// it sends dead outputs without running. A kernel error goes to the step actor, which aborts
// the step everywhere. Inputs of an aborted step that arrive late are dropped.
// A queue node monitors its queue actor: a queue that dies holding requests of this node
// answers none of them, so each step that waits for one fails naming the node and the queue.
#include <map>
#include <memory>
#include <unordered_set>
#include <array>
#include <deque>

#include "actors/executable.hpp"

namespace troupe {

class NodeActor : public caf::event_based_actor {
 public:
  NodeActor(caf::actor_config& config, std::shared_ptr<const ExecPlan> plan, int index,
            std::unique_ptr<OpKernel> kernel);
  caf::behavior make_behavior() override;
  void on_exit() override;
  const char* name() const override { return "troupe.node"; }

 private:
  // The inputs of one tag so far. Up to kInline inputs are stored inside the slot, and the
  // first slot inside the actor, so the common case (one tag at a time, few inputs) touches
  // no memory outside the actor object.
  static constexpr int kInline = 4;
  struct Pending {
    bool primed = false;  // the hoisted constants are in place
    bool used = false;
    bool dead = false;
    int remaining = 0;
    Tag tag;
    uint64_t arrived = 0;  // bit s: data slot s has arrived (slots below 64)
    std::array<Tensor, kInline> small;
    std::vector<Tensor> big;  // instead of small when the node has more inputs
    Tensor* inputs() { return big.empty() ? small.data() : big.data(); }
    const Tensor* inputs() const { return big.empty() ? small.data() : big.data(); }
  };

  void on_input(const Tag& tag, uint32_t slot, Value& value);
  void on_abort(uint64_t step);
  void on_queue_down(const caf::down_msg& down);
  void remember_abort(uint64_t step);
  std::vector<WaitReport> on_waits() const;

  void fire(const Tag& tag, Tensor* inputs, bool dead);
  // The bytes of a firing's inputs, which decide whether it leases a core (devices/cpu_threads.hpp).
  std::size_t input_bytes(const Tensor* inputs) const;
  void fire_variable_op(const Tag& tag, Tensor* inputs);
  void fire_queue_op(const Tag& tag, Tensor* inputs);
  void emit(const Tag& tag, Tensor* outputs, bool dead, uint64_t dead_outputs = 0);
  void on_merge_input(const Tag& tag, uint32_t slot, Value& value);
  // Frames (ARCHITECTURE.md): the loop roles of NodePlan::role.
  void on_loop_merge_input(const Tag& tag, uint32_t slot, Value& value);
  void on_next_iteration_input(const Tag& tag, uint32_t slot, Value& value);
  void on_invariant_input(const Tag& tag, uint32_t slot, Value& value);
  void on_exit_input(const Tag& tag, uint32_t slot, Value& value);
  void on_stack_push(const Tag& tag, Value& value);
  bool fire_frame_op(const Tag& tag, Tensor* inputs, bool dead);
  void report_error(const Tag& tag, ErrorCode code, const std::string& cause);
  Pending& pending_for(const Tag& tag);
  void start(Pending& p, const Tag& tag);
  void release(Pending& p);

  std::shared_ptr<const ExecPlan> plan_;
  const NodePlan* me_;
  std::unique_ptr<OpKernel> kernel_;
  int expected_;
  std::unordered_set<uint64_t> aborted_;  // read by every input: kept with the other hot fields
  // One slot per tag in progress; a slot is reused once its tag has fired, so the steady
  // state allocates nothing per tag. Slots are few (steps in flight x live iterations).
  Pending first_;
  std::vector<std::unique_ptr<Pending>> more_;
  uint64_t fixed_mask_ = 0;         // bit s: data slot s holds a hoisted constant
  std::vector<int> message_slots_;  // the data slots filled by messages
  std::vector<Tensor> scratch_;  // the inputs of a one-message firing; hoisted constants preset
  std::vector<Tensor> outputs_;
  // Per loop invocation (step, frame id), freed when the frame is over.
  using FrameKey = std::pair<uint64_t, uint64_t>;
  // Which iterations of a frame have finished (the iteration gate says so, in any order).
  struct FinishedIterations {
    int64_t below = 0;            // iterations below this one have all finished
    std::vector<int64_t> above;   // finished out of order
    void finish(int64_t iteration);
  };
  struct IterationGate {  // NextIteration: which iterations have finished, which wait to start
    FinishedIterations done;
    std::vector<std::pair<Tag, Tensor>> held;  // values for iterations not allowed to start yet
    int64_t last = -1;              // the iteration that found the loop over
  };
  struct Invariant {  // constant Enter: the value, handed to each iteration as it starts
    bool arrived = false;
    bool dead = false;
    Tensor value;
    int64_t served = 0;       // iterations given the value so far
    int64_t end = -1;         // the loop's last iteration, once known
    std::vector<Tag> waiting;  // iterations that started before the value arrived
  };
  struct ExitState {  // Exit: the last iteration's value and pred, whichever came first
    Tensor value;
    int64_t last = -1;  // the iteration whose pred was false or dead
    bool dead = false;
    FinishedIterations done;  // gated
  };
  // The state of the frame and queue roles, made when first needed: most nodes never need
  // it, and a small actor object keeps a large graph's actors in cache.
  struct RoleState {
    std::map<FrameKey, IterationGate> gates;
    std::map<FrameKey, Invariant> invariants;
    std::map<FrameKey, ExitState> exits;
    std::map<uint64_t, int> queue_requests;  // per step: requests a queue has not answered yet
  };
  std::unique_ptr<RoleState> roles_;
  RoleState& roles() {
    if (!roles_) roles_ = std::make_unique<RoleState>();
    return *roles_;
  }
  void serve(Invariant& inv, const Tag& tag);
  void forget_if_over(std::map<FrameKey, Invariant>::iterator it);
  std::deque<uint64_t> aborted_order_;
};

}  // namespace troupe
