#pragma once
// An Executable is one run signature (feeds, fetches, targets) of a graph, prepared once and
// reused by every step with that signature. It is built from the partitions this process runs,
// which the signature pipeline (actors/signature.hpp) prunes, places and cuts, in named steps:
//   plan      per partition an ExecPlan built from that partition alone (plus which of its
//             nodes are fetched): each node's actor kind, inputs, constants, kernel;
//   spawn     one actor per node of every partition, and the step actor;
//   wire      each output to its consumers' actors, each _Send where its rendezvous
//             (rendezvous.hpp) says, fetches and targets to the step actor.
// A partition keeps its own frame and stack state (no partition reads another's), so each
// could run in another process. The plans hold the actors' handles and each actor holds its
// plan; the destructor breaks that cycle once every actor is down.
//
// An ExecPlan is written while the Executable is being built and is read-only from the moment
// the first message is sent; node actors read it without locks. The two mutex-guarded members,
// `stacks` and `frames`, each guard only their own map (a call takes one lock and calls out to
// nothing but, for `stacks`, a freed tensor's allocator, whose lock is always taken last). Destroying the Executable stops all
// its actors; it must not happen while a step is in flight.
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "actors/executor/frame_table.hpp"
#include "actors/executor/node_kind.hpp"
#include "actors/executor/rendezvous.hpp"
#include "actors/executor/step_actor.hpp"
#include "actors/executor/target.hpp"
#include "actors/messages.hpp"
#include "actors/signature.hpp"
#include "actors/state/param_shard.hpp"
#include "actors/state/queue_actor.hpp"
#include "ops/kernel.hpp"

namespace troupe {

class NodeActor;

// The values StackPush nodes save for a loop's gradient, per step, stack and iteration path
// (the iterations of every frame the push ran in, outermost first); shared by the node actors
// of one executable (under a mutex). A value is forgotten when popped; what no pop took is
// dropped when the step ends.
class StackStore {
 public:
  using Path = std::vector<int64_t>;
  void push(uint64_t step, uint64_t stack, Path path, Value value);
  // Takes the value saved under `path`; throws internal when there is none.
  Value pop(uint64_t step, uint64_t stack, const Path& path);
  void drop_step(uint64_t step);
  std::size_t size() const;  // values held

 private:
  using Key = std::tuple<uint64_t, uint64_t, Path>;
  // Guards values_. A Value freed under it (drop_step, a push over an old one) gives its
  // buffer back to its allocator, whose lock takes no other: the order is this, then that.
  mutable std::mutex mutex_;
  std::map<Key, Value> values_;
};
// A while loop whose iterations may overlap (parallel_iterations > 1), as its nodes in one
// partition see it: while an iteration's kernels cost more than a trip to another core, each
// iteration runs on one worker, the iterations spread over the workers (node.hpp, spread()).
struct IterationSpread {
  // The loop's kernel nodes' firings here, summed (each node's average, in trace::now()'s
  // ticks), as the nodes last reported them (kernel_node.hpp): about one iteration's cost.
  std::atomic<int64_t> cost{0};
  // The part of it on the way to the next iteration (NodePlan::carried): the iterations
  // overlap only as far as the rest does not feed the next.
  std::atomic<int64_t> carried{0};
  // Its parallel_iterations: how many iterations may run at once (FrameTable::iteration_worker).
  int window = 2;
};

struct NodePlan {
  // What every firing reads first, together.
  const Node* node = nullptr;
  const Device* device = nullptr;
  NodeKind kind = NodeKind::kernel;
  bool active = true;    // false: a hoisted Const that needs no actor
  int num_inputs = 0;    // data slots (an _Arg has one: the feed)
  int num_fixed = 0;     // data slots filled once, from a hoisted Const
  int num_controls = 0;  // control inputs, plus one start signal for a source node
  std::vector<std::vector<Target>> outputs;  // per output port
  std::vector<Target> control_outputs;
  // Per data slot: the hoisted constant, or empty; no slots at all when none has one (most
  // nodes: 10,000 of them would pay ~2 MB of fresh memory at set-up for empty tensors).
  std::vector<Tensor> fixed_inputs;
  bool is_fixed(int slot) const { return !fixed_inputs.empty() && fixed_inputs[std::size_t(slot)].is_initialized(); }
  // One tensor per data slot, the hoisted constants in theirs: a firing's inputs before any arrive.
  std::vector<Tensor> preset_inputs() const {
    std::vector<Tensor> inputs = fixed_inputs;
    inputs.resize(std::size_t(num_inputs));
    return inputs;
  }
  IterationSpread* spread = nullptr;  // the loop's, when the node works in such a loop
  bool carried = false;  // with spread: the next iteration waits for it (a NextIteration reads it)
  // A kernel node of a loop whose iterations may overlap (parallel_iterations > 1) but do not
  // spread (it carries a large value, an RNN's state) that the next iteration does not wait
  // for: work beside the loop's chain, which a worker with nothing to do may take
  // (NodeActor::schedule) while the chain goes on here.
  bool side = false;
  // A kernel node of an op without state whose every input and output has a shape known before
  // the step, of at most kTinyElements elements (a scalar add, a comparison, a shape's vector;
  // not a random draw): cheap from its first firing, not only once timed (NodeActor::cheap_).
  // Any other kernel node is expensive until it has fired, so that an unknown convolution is
  // handed to an idle worker in the first step.
  static constexpr int64_t kTinyElements = 64;
  bool tiny = false;
  // A kernel node inside a while loop (its frame), firing once an iteration: an expensive one
  // stays on the core that made its inputs when nothing else waits there (NodeActor::end_turn).
  bool in_loop = false;
  // A kernel node of such a loop that the next iteration does not wait for, with a kernel that
  // keeps no state between firings (not OpDef::stateful), on a CPU: one actor per scheduler
  // worker, the replicas, replica w taking the iterations that run on worker w
  // (FrameTable::iteration_worker), so each stays on its worker while the iterations spread
  // (its state is not handed between cores every iteration). 1: one actor, as every other node.
  int replicas = 1;
  std::vector<NodeActor*> replica_nodes;  // with replicas > 1: its actors, [0] the node's own
  const Graph* graph = nullptr;               // the partition's graph, which holds `node`
  const std::string* device_name = nullptr;  // the partition's device (full name)

  // Made when asked (errors, wait reports), not per node at set-up:
  // "Add 'x' on /job:localhost/task:0/device:CPU:0", prefixed to errors;
  std::string where() const;
  // what data slot `slot` waits for, for wait reports ("x:0", "feed 0", "x:0 (from DEVICE)");
  std::string input_name(int slot) const;
  // and its producer (an empty node for a feed).
  WaitSource input_source(int slot) const;
};

// What a node of the loop kinds (enter, exit, next_iteration, loop_invariant, loop_merge) reads
// beyond its NodePlan, kept apart (ExecPlan::loops) like StatePlan. Made for every such node
// while the plan is made, completed while it is wired (after the actors are spawned: they point
// at it from their construction; a map's element stays where it is).
struct LoopPlan {
  int parallel_iterations = 1;  // next_iteration
  // enter, loop_invariant, a loop_merge serving invariants: fingerprint64 of the frame name.
  uint64_t frame_hash = 0;
  int frame_exits = 0;   // enter: how many Exits the loop has here (its frame's lifetime)
  int frame_enters = 0;  // enter: how many (non-constant) Enters the loop has here
  // next_iteration: the Exits of its loop told once, when every iteration of a frame has
  // finished (its gate state is freed), instead of by the iteration gate every iteration.
  std::vector<Target> loop_end;
  // exit: how many NextIterations tell it so (loop_end); 0: its gate's signal comes every
  // iteration (a partition's control loop, whose NextIteration is not gated).
  int loop_end_signals = 0;
  // A loop invariant whose loop's first Merge is here (its control input) is served by that
  // Merge: the Merge hands the value to each iteration as it starts it, from state it keeps per
  // frame, the way TensorFlow's frame state hands loop invariants to a new iteration without
  // running a node (loop_merge_node.hpp). The invariant's value comes to the Merge on slot
  // kInvariantSlot + its index among those the Merge serves, the LoopCond's false or dead on
  // kLoopEndSlot, and the invariant's own actor gets nothing: not a turn and two messages an
  // iteration. (An invariant whose Merge is on another device serves its value itself.)
  // loop_merge: the LoopCond's producers here it hears on kLoopEndSlot (one, the LoopCond or its
  // _Recv, however many invariants it serves), and the loop invariants it serves, if any (the
  // list is the plan's, ExecPlan::hosted: a pointer here, not a vector in each plan).
  int loop_end_inputs = 0;
  const std::vector<int>* hosted = nullptr;
  static constexpr uint32_t kLoopEndSlot = 2;
  static constexpr uint32_t kInvariantSlot = 3;
};

// What a node of the stack, queue or variable kinds reads beyond its NodePlan, kept apart
// (ExecPlan::states) so that the plan of every other node, most of a graph, does not carry it.
// The handles hold actors that hold the plan: ~Executable drops them.
struct StatePlan {
  uint64_t stack_hash = 0;                    // stack kinds: fingerprint64 of the stack name
  QueueActor queue;                           // queue: the queue actor (null for an inactive node)
  QueueOp queue_op = QueueOp::size;           // queue: what it asks the queue
  ShardActor shard;                           // variable: the parameter shard holding its variable
  VariableOp variable_op = VariableOp::read;  // variable: what it asks the shard
};

// One partition's plan: what its node actors read.
struct ExecPlan {
  uint64_t trace_key = 0;        // the executable's, for the tracer (core/trace.hpp)
  std::string device;            // the partition's device
  std::shared_ptr<Graph> graph;  // the partition
  std::vector<NodePlan> nodes;  // indexed like graph's nodes
  // Per node (empty for inactive nodes), then the other replicas of nodes with several
  // (NodePlan::replicas): what aborts, wait reports and the destructor reach.
  std::vector<caf::actor> actors;
  std::vector<NodeActor*> fast;    // the same: each actor, when it runs on the fast path (node.hpp)
  caf::actor step_actor;
  std::vector<int> sources;  // nodes started by the step actor's start signal
  std::vector<std::unique_ptr<IterationSpread>> spreads;  // per loop with parallel_iterations > 1
  std::map<int, std::vector<int>> hosted;  // per loop Merge serving invariants, those (LoopPlan::hosted)
  // Per node of the stack, queue and variable kinds (by id), what only those read; a map's
  // entries keep their place, so a node's actor may keep a pointer to its own.
  std::map<int, StatePlan> states;
  // Per node of the loop kinds (by id): its LoopPlan.
  std::map<int, LoopPlan> loops;
  const LoopPlan& loop_of(const NodePlan& node) const { return loops.at(int(&node - nodes.data())); }
  const StatePlan& state_of(const NodePlan& node) const { return states.at(int(&node - nodes.data())); }
  mutable StackStore stacks;
  mutable FrameTable frames;
};

// What the step actor reads: every partition, and where feeds go.
struct StepPlan {
  using Feed = PartitionSet::Feed;
  std::vector<std::shared_ptr<ExecPlan>> parts;
  std::vector<Feed> args;  // per feed
  int num_fetches = 0;
  int num_targets = 0;
  int num_awaited_sends = 0;  // _Sends the answer waits for (Rendezvous::awaits)
  std::vector<std::string> fetch_names;
  std::shared_ptr<const Rendezvous> rendezvous;  // never null
};

class Runtime;

struct ExecutableOptions {
  bool allow_soft_placement = true;
  Runtime* runtime = nullptr;  // where queues live; needed by graphs with queue ops
  // How nodes without a device request are placed (graph/placement.hpp); by default from
  // TROUPE_PLACEMENT.
  std::optional<PlacementOptions::Policy> placement_policy;
  // The device of this process a partition's device name stands for; unset: the registry's
  // device of that name (partitions named for another job and task map to this process's own).
  std::function<const Device*(const std::string&)> find_device;
  // Where its _Sends deliver (rendezvous.hpp); unset: a LocalRendezvous.
  std::shared_ptr<Rendezvous> rendezvous;
  // What names this executable's steps to the tracer (core/trace.hpp), when its steps are named
  // elsewhere too; 0: a number of its own, unique in the process.
  uint64_t trace_key = 0;
};

// The parameter shard that holds a variable (by shared name).
using ShardOf = std::function<ShardActor(const std::string& variable)>;

class Executable {
 public:
  // Every partition of the signature, placed over this process's devices (actors/signature.hpp).
  Executable(caf::actor_system& system, const Graph& graph, const std::vector<Endpoint>& feeds,
             const std::vector<Endpoint>& fetches, const std::vector<int>& targets,
             const ShardOf& shard_of, const ExecutableOptions& options);
  // Partitions the signature pipeline placed and cut: plan, spawn and wire them.
  Executable(caf::actor_system& system, PartitionSet set, const ShardOf& shard_of, const ExecutableOptions& options);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  const StepActor& step_actor() const { return step_actor_; }
  // The partitions, one per device that runs part of the signature.
  const std::vector<std::shared_ptr<ExecPlan>>& parts() const { return plan_->parts; }
  // The partition of `device` (full name); nullptr if nothing runs there.
  const ExecPlan* part_on(const std::string& device) const;
  // What names this executable's steps to the tracer: trace::begin(trace_key(), step) traces one.
  uint64_t trace_key() const { return trace_key_; }
  // Called when a step of this executable has ended (either way): after the first, a large
  // graph's node state goes to the huge-page thread (core/huge_pages.hpp). Not before: copying
  // pages into huge ones while the first step touches them for the first time slows that step.
  void step_ended();

 private:
  caf::actor_system* system_;
  std::mutex hot_mutex_;
  std::vector<const void*> hot_;  // what step_ended() hands over, once
  std::shared_ptr<StepPlan> plan_;
  StepActor step_actor_;
  uint64_t trace_key_ = 0;
  void build(PartitionSet set, const ShardOf& shard_of, const ExecutableOptions& options);
};

// What the node actors of `exes` hold and wait for: every actor asked at once, the answers
// awaited for at most `bound` (a node busy with a long kernel answers late, and is left out).
// With `step`, only that step's, which the actors are told is running (a _Recv then says which
// value has not come, and a node that has had no input yet but whose value another device waits
// for is added, inferred, with the waiting nodes it depends on). A local session's reports and
// an executable run as a share of steps reports the same way.
std::vector<WaitReport> ask_waits(caf::actor_system& system, const std::vector<const Executable*>& exes,
                                  caf::duration bound, std::optional<uint64_t> step = std::nullopt);

}  // namespace troupe
