#pragma once
// NodeActor: what the actor of every graph node of one Executable shares, whatever its kind
// (node_kind.hpp; each kind is a class of its own in this folder, spawn_node.hpp picks it).
// Takes
//   (input_atom, Tag, slot, Value)  an input (or, at kControlSlot, a control signal or the start
//                                   signal) of a tag, handed to the kind's on_input;
//   (abort_atom, step)              drop all state of a step that failed elsewhere;
//   (waits_atom)                    reply the tags held and the inputs still awaited.
//   (waits_atom, step)              the same for one step that is running.
// Sends each output of a tag to each consumer with the same tag, and an error (a kernel's, a
// shard's, a queue's) to the step actor, which aborts the step everywhere. Inputs of an
// aborted step that arrive late are dropped.
// Per tag, the kinds that wait for every input (the default on_input) keep the inputs received
// so far in a Pending slot; when all data and control inputs of the tag have arrived the kind
// fires, and the slot is free for the next tag. Kinds that keep other state (per frame, per
// step) free it when it is over, and when the step is aborted (drop_step). A kernel node's
// inputs of a tag wait in its mailbox, unclaimed, until the last it needs comes (deferral()):
// one turn per firing.
#include <array>
#include <atomic>
#include <latch>
#include <memory>
#include <unordered_set>

#include "actors/executor/executable.hpp"
#include "actors/executor/fast_path.hpp"
#include "actors/executor/mailbox.hpp"
#include "core/trace.hpp"

namespace troupe {

class NodeActor : public CleanupHookActor {
 public:
  // `kernel`: a kernel node's kernel (kernel_node.hpp); null for every other kind.
  // `replica`: which of the node's actors this is (NodePlan::replicas), 0 for its own.
  NodeActor(caf::actor_config& config, std::shared_ptr<const ExecPlan> plan, int index,
            std::unique_ptr<OpKernel> kernel = nullptr, int replica = 0);
  caf::behavior make_behavior() override;
  void on_exit() override;
  const char* name() const override { return "troupe.node"; }
  // Counts `latch` down once this actor's cleanup (its exit) has run, at once if it has run
  // already: after it the actor touches nothing of the plan's. ~Executable waits for its nodes
  // so, where a monitor would send it a message per node.
  void count_down_at_cleanup(std::latch& latch);

  // Whether the node runs on the fast path (above); set at spawn, from its kind.
  bool fast() const { return fast_; }
  // Puts an input (abort, call) in a fast node's mailbox, from any thread. `unit`: the sender's
  // execution unit, where a node made ready is scheduled (null: the scheduler picks one).
  void post(caf::execution_unit* unit, const Tag& tag, uint32_t slot, Value&& value);
  void post_abort(caf::execution_unit* unit, uint64_t step);
  void post_call(caf::execution_unit* unit, NodeMailbox::Call&& call);
  // Stops a fast node: once `done` has been called it takes nothing from its mailbox any more
  // (what comes is dropped), so its actor may free its state.
  void stop_fast_path(std::function<void()> done);
  // The worker `tag`'s iteration runs on, for a node of a loop that spreads its iterations: a
  // replica's own (NodePlan::replicas), else the one the partition's frame state gives the
  // iteration (FrameTable::iteration_worker). Any thread.
  int iteration_worker(const Tag& tag) const;
  // The worker the partition's frame state gives `tag`'s iteration (FrameTable::iteration_worker,
  // which places it at the first ask). Any thread.
  int place(const Tag& tag) const;

 protected:
  // The inputs of one tag so far. Up to kInline inputs are stored inside the slot, and the
  // first slot inside the actor, so the common case (one tag at a time, few inputs) touches
  // no memory outside the actor object.
  static constexpr int kInline = 2;
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

  // An input of a step that is not aborted. By default: wait for every data and control input
  // of the tag, then fire.
  virtual void on_input(const Tag& tag, uint32_t slot, Value& value);
  // All inputs of the tag have arrived: `inputs` holds one tensor per data slot (hoisted
  // constants included), `dead` says whether any input was dead. Kinds that take their inputs
  // one by one (they override on_input) never fire.
  virtual void fire(const Tag&, Tensor*, bool) {}
  // The step has been aborted: free what the kind keeps of it beyond its Pending slots.
  virtual void drop_step(uint64_t) {}
  // What the kind waits for beyond its Pending slots, for wait reports.
  virtual void add_waits(std::vector<WaitReport>&) const {}
  // The same for one step the caller knows is running (waits_atom with a step): what the kind
  // can tell only knowing that, such as a value that has not come for it.
  virtual void add_step_waits(uint64_t, std::vector<WaitReport>&) const {}
  // What an actor this node waits on says it waits for in step `step` (wait_note_atom; kinds
  // that wait on actors only, never on the fast path): by default, nothing is kept.
  virtual void on_wait_note(uint64_t, std::string) {}

  // What the node waits for as its claim is given up (defers_ only): a kernel node that holds
  // the inputs of one tag or none lets the rest of that tag wait in its mailbox
  // (NodeMailbox::Deferral); a kind may say otherwise (defer_inputs()).
  virtual NodeMailbox::Deferral deferral() const;
  // For a kind that keeps more state than its inputs: deferral() is asked (on the fast path).
  void defer_inputs() { defers_ = fast_; }
  bool is_aborted(uint64_t step) const { return !aborted_.empty() && aborted_.count(step); }
  // Sends each output to its consumers (dead ones on dead, or every one if `dead`) and a control
  // signal to each control consumer.
  void emit(const Tag& tag, Tensor* outputs, bool dead, uint64_t dead_outputs = 0);
  // The same for live outputs the caller is done with: each port's last consumer gets the
  // tensor itself, not a copy (one reference count less to add and drop), and `outputs` are
  // empty after it.
  void emit_owned(const Tag& tag, Tensor* outputs, uint64_t dead_outputs = 0);
  // emit() as another node of the partition: its outputs to its consumers (a loop invariant's
  // value, which its loop's Merge serves: LoopPlan::hosted).
  void emit_for(const NodePlan& node, const Tag& tag, Tensor* outputs, bool dead);
  // A Merge's firing (both kinds): `value` on output 0 and, where something reads it (a
  // consumer or a fetch: a target of output 1), `slot` as its value_index on output 1.
  void emit_merged(const Tag& tag, Tensor&& value, uint32_t slot);
  // Sends inputs[0] on, dead or not, letting go of it first (a send or recv: no kernel).
  void pass_input_on(const Tag& tag, Tensor* inputs, bool dead);
  void report_error(const Tag& tag, ErrorCode code, const std::string& cause);
  // A frame this partition's frame state does not know (no Enter of `loop` ran here) fails the
  // step naming the loop, unless the step has failed already (its frames were dropped).
  void report_unknown_frame(const Tag& tag, const std::string& loop);
  Pending& pending_for(const Tag& tag);
  // A traced step's slice of this node's from `start` to `end` (core/trace.hpp's now()): its
  // executable, step, frame, iteration and node filled in.
  trace::Event trace_event(const Tag& tag, int64_t start, int64_t end) const;
  // trace::now() when the tag's step is traced, else 0 (off: one relaxed load, and the plan is
  // not read).
  int64_t trace_start(const Tag& tag) const {
    return trace::on() && trace::detail::is_marked(plan_->trace_key, tag.step) ? trace::now() : 0;
  }
  void release(Pending& p);
  // The execution unit this node runs on now (its actor's context, or the fast path's thread's).
  caf::execution_unit* unit();
  // The data slots filled by messages (bit s: slot s, the first 64): a kernel may write over
  // those (KernelContext::allow_forwarding), never over a hoisted constant.
  uint64_t message_mask() const { return message_mask_; }
  // Lets go of the inputs that came by message (the hoisted constants stay).
  void let_go_of_inputs(Tensor* inputs) {
    for (uint64_t m = message_mask_; m != 0; m &= m - 1) inputs[__builtin_ctzll(m)].reset();
    for (int s : message_slots_beyond_) inputs[s].reset();
  }

  // The fields every turn reads come first, together: the fast path's mailbox and flags, then
  // what every firing reads, the kernel among them. A step of a large graph touches each actor
  // once, so each cache line they span costs a miss (prefetch_fields() fetches them ahead, from
  // mailbox_ to aborted_next_).
 private:
  NodeMailbox mailbox_;
  bool fast_ = false;
  std::atomic<bool> stopped_{false};  // by the call of stop_fast_path(); read by make_behavior() too
  bool spreads_ = false;  // me_->spread is set: the node's loop may spread its iterations
  bool defers_ = false;   // its inputs may wait in the mailbox until it can fire (deferral())
  bool side_ = false;     // me_->side: work beside its loop's chain (schedule())

 protected:
  // A node whose turn is short: made ready by another node's turn, it runs on that thread next
  // (the fast path). Kinds other than kernel always are; a kernel node from its firings' cost.
  bool cheap_ = true;
  // What a turn costs, in trace::now()'s ticks: a kernel node's average firing, else a guess.
  int32_t cost_ = kTurnTicks;
  // On this thread's ready list by spread(): it runs here (never offered or handed over), and
  // its cost is not counted in what the list offers.
  bool pinned_ = false;
  // The KiB of a single-threaded CPU kernel's inputs at its last firing when they fit a core's
  // cache (FreeBlocks::kWarmBytes): what another core would read from this one's if the node
  // ran there. 0 for larger inputs (mostly in the cache the cores share, whichever core runs
  // the node: a CNN's 6 MB gradients) and for any other node. (In the padding after pinned_:
  // the hot fields keep their lines.)
  uint16_t in_kib_ = 0;
  // What moving the node's inputs to another core costs, in ticks (kBytesPerMoveTick).
  int64_t move_ticks() const { return int64_t(in_kib_) * 1024 / kBytesPerMoveTick; }
  int64_t ready_cost() const { return pinned_ ? 0 : cost_; }

 private:
  std::vector<NodeMailbox::Item> taken_;
  std::vector<NodeMailbox::Call> taken_calls_;

 protected:
  std::shared_ptr<const ExecPlan> plan_;
  const NodePlan* me_;
  std::unique_ptr<OpKernel> kernel_;  // a kernel node's; null for every other kind
  int expected_;  // data inputs by message, control inputs and the start signal
  int replica_;   // which of the node's actors (NodePlan::replicas)

 private:
  // emit() and emit_owned(), one body compiled twice (no test of `owned` per output).
  template <bool owned>
  void send_outputs(const NodePlan& from, const Tag& tag, Tensor* outputs, bool dead, uint64_t dead_outputs);
  void on_abort(uint64_t step);
  void remember_abort(uint64_t step);
  std::vector<WaitReport> on_waits() const;
  std::vector<WaitReport> step_waits(uint64_t step) const;
  void start(Pending& p, const Tag& tag);

  std::unordered_set<uint64_t> aborted_;  // read by every input: kept with the other hot fields
  // One slot per tag in progress; a slot is reused once its tag has fired, so the steady
  // state allocates nothing per tag. Slots are few (steps in flight x live iterations).
  Pending first_;
  std::vector<std::unique_ptr<Pending>> more_;
  uint64_t fixed_mask_ = 0;         // bit s: data slot s holds a hoisted constant
  // The data slots filled by messages: bit s for the first 64 (in the node, not a vector's
  // line of its own: a large graph's step touches each node once, each line a miss), the
  // others by number.
  uint64_t message_mask_ = 0;
  std::vector<int> message_slots_beyond_;
  std::vector<Tensor> scratch_;     // the inputs of a one-message firing (expected_ 1 only); hoisted constants preset

 protected:
  std::vector<Tensor> outputs_;

 private:
  std::vector<uint64_t> aborted_order_;  // the steps in aborted_, as a ring (remember_abort)
  std::size_t aborted_next_ = 0;

  // The fast path (its constants and jobs: fast_path.hpp).
  friend class NodeRunner;
  friend class ReadyBatch;
  // After a node's turn on the fast path: where the expensive node it made ready goes.
  static void end_turn(caf::execution_unit* unit);
  // Runs this thread's ready nodes, each in its turn, handing half of them to a worker that has
  // nothing to do whenever there is one.
  static void run_ready(caf::execution_unit* unit);

 public:
  // Sets the cost of an iteration above which a loop spreads (kSpreadTicks until then; -1:
  // back to it); 0 spreads every loop that may spread, and every node of it, whatever its
  // iterations and turns cost and however much of it feeds the next (for tests).
  static void set_spread_ticks(int64_t ticks);

 private:
  // At construction: whether the node runs on the fast path, and how (the flags above, the
  // mailbox's room).
  void set_up_fast_path();
  // With the claim held: run the node soon (hand-off or the scheduler).
  void schedule(caf::execution_unit* unit);
  // With the claim held, for a node of a loop whose iterations spread over the workers
  // (IterationSpread): runs it on the worker of `tag`'s iteration; false when they do not
  // spread now (the loop's kernels are all cheap, or one worker).
  bool spread(const Tag& tag);
  // With the claim held, on the fast path: the node joins this thread's ready list pinned (it
  // runs here: never offered or handed over), first or behind the nodes waiting there.
  void pin_here(bool first);
  // The worker of `tag`'s iteration while the node's loop spreads its iterations, else -1.
  int spread_worker(const Tag& tag) const;
  // Whether the node goes with its iteration now: its loop spreads (its iterations cost enough,
  // little of that is carried, two workers or more) and its turns cost more than a trip to
  // another core (or set_spread_ticks(0) spreads everything).
  bool spreads_now() const;
  // With the claim held: the node's turn goes to worker `worker`'s queue.
  void send_to_worker(int worker);
  void enqueue_runner(caf::execution_unit* unit);
  // The same, but to a worker that has nothing to do if there is one.
  void give_away(caf::execution_unit* unit);
  // Hands the node to a worker that has nothing to do; false when there is none.
  bool offer(caf::execution_unit* unit);
  // Sends the nodes made ready on this thread (from position `from` of its ready list) to the
  // scheduler's queues instead, where other threads may take them.
  static void hand_over(std::size_t from);
  // With the claim held: runs what is in the mailbox, a few rounds.
  enum class Drained {
    idle,     // the mailbox was empty: the claim is given up
    more,     // there may be more: the claim is still held
    stopped,  // the fast path was stopped: the claim is kept for good (nothing runs the node
              // again), and the caller must call finish_stop() as the last thing it does with it
    behind,   // the node has more inputs, one of its iteration's nodes was made ready here:
              // the claim is still held, the node waits behind that one (pin_here())
    moved,    // the claim went to another worker with an input of its iteration (spread()):
              // the caller must not touch the node again
  };
  Drained drain();
  void handle(NodeMailbox::Item& item);
  // Runs the calls taken from the mailbox (some were); true when one stopped the node.
  bool run_calls();
  // Tells stop_fast_path's caller that the node is stopped; the node may be gone after it.
  void finish_stop();
  // Prefetches what a turn of this claimed node reads through its fields: its plan, kernel and
  // outputs (the fields themselves should be in the cache or on their way: prefetch_fields()).
  void prefetch() const;
  // Prefetches the node's hot fields (from mailbox_ to aborted_next_), no more than kHotFieldLines lines.
  void prefetch_fields() const;
  // Prefetches the mailbox of a consumer on the fast path that deliver() posts to; `replica`:
  // the producer's, as send_outputs passes it to deliver() (-1: not a replica).
  static void prefetch_mailbox(const Target& t, int replica);

  NodeRunner runner_{this};
  std::function<void()> stop_done_;
  // Counts count_down_at_cleanup()'s latch down, if one is set, and marks the cleanup done.
  void on_cleaned_up() final;
  // count_down_at_cleanup()'s latch; cleaned_up_mark() once the cleanup has run.
  std::atomic<std::latch*> cleanup_latch_{nullptr};
};

// The fast path's senders (declared in fast_path.hpp), inline here where NodeActor is complete.
inline void send_to(caf::execution_unit* unit, NodeActor* fast, const caf::actor& actor, const Tag& tag, uint32_t slot,
                    Value&& value) {
  if (fast) fast->post(unit, tag, slot, std::move(value));
  else send_input(unit, actor, tag, slot, std::move(value));
}

inline void deliver(caf::execution_unit* unit, const Target& to, const Tag& tag, uint32_t slot, Value&& value,
                    int replica) {
  if (to.replicas) [[unlikely]] {
    const int r = replica >= 0 ? replica : to.node->place(tag);
    to.replica(r)->post(unit, tag, slot, std::move(value));
    return;
  }
  send_to(unit, to.node, to.actor, tag, slot, std::move(value));
}

inline void send_to_node(caf::execution_unit* unit, const ExecPlan& part, int id, const Tag& tag, uint32_t slot,
                         Value&& value) {
  send_to(unit, part.fast[std::size_t(id)], part.actors[std::size_t(id)], tag, slot, std::move(value));
}

}  // namespace troupe
