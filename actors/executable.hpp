#pragma once
// An Executable is one run signature (feeds, fetches, targets) of a graph, prepared once and
// reused by every step with that signature: the pruned, CSE'd subgraph, each node placed on a
// device, one node actor per node, and one step actor that starts steps and collects fetches.
// The plan holds the actors' handles and each actor holds the plan; the destructor breaks
// that cycle once every actor is down.
//
// The ExecPlan below is written while the Executable is being built and is read-only from the
// moment the first message is sent; node actors read it without locks. Destroying the
// Executable stops all its actors; it must not happen while a step is in flight.
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>
#include <vector>

#include "actors/executor/node_kind.hpp"
#include "actors/messages.hpp"
#include "graph/prune.hpp"
#include "ops/kernel.hpp"

namespace troupe {

struct Target {
  caf::actor actor;
  uint32_t slot;
  bool drop_dead = false;  // an Exit's data input: only the last iteration's live value matters
};

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
  mutable std::mutex mutex_;
  std::map<Key, Value> values_;
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
  std::vector<Tensor> fixed_inputs;  // per data slot: the hoisted constant, or empty
  // The frame, stack, variable and queue kinds'.
  int parallel_iterations = 1;   // next_iteration
  uint64_t frame_hash = 0;       // enter, loop_invariant: fingerprint64 of the frame name
  int frame_exits = 0;           // enter: how many Exits the loop has here (its frame's lifetime)
  int frame_enters = 0;          // enter: how many (non-constant) Enters the loop has here
  uint64_t stack_hash = 0;       // stack kinds: fingerprint64 of the stack name
  caf::actor queue;              // queue: the queue actor
  QueueOp queue_op = QueueOp::size;           // queue: what it asks the queue
  caf::actor shard;              // variable: the parameter shard holding its variable
  VariableOp variable_op = VariableOp::read;  // variable: what it asks the shard
  std::vector<std::string> input_names;  // per data slot, for wait reports
  std::string where;  // "Add 'x' on /job:localhost/task:0/device:CPU:0", prefixed to errors
};

struct ExecPlan {
  std::shared_ptr<Graph> graph;
  std::vector<NodePlan> nodes;  // indexed like graph's nodes
  std::vector<caf::actor> actors;  // per node; empty for inactive nodes
  caf::actor step_actor;
  std::vector<int> sources;  // nodes started by the step actor's start signal
  std::vector<int> args;     // the _Arg node of each feed
  int num_fetches = 0;
  int num_targets = 0;
  std::vector<std::string> fetch_names;
  mutable StackStore stacks;
  mutable FrameTable frames;
};

class Runtime;

struct ExecutableOptions {
  bool allow_soft_placement = true;
  Runtime* runtime = nullptr;  // where queues live; needed by graphs with queue ops
};

// The parameter shard that holds a variable (by shared name).
using ShardOf = std::function<caf::actor(const std::string& variable)>;

class Executable {
 public:
  Executable(caf::actor_system& system, const Graph& graph, const std::vector<Endpoint>& feeds,
             const std::vector<Endpoint>& fetches, const std::vector<int>& targets,
             const ShardOf& shard_of, const ExecutableOptions& options);
  ~Executable();
  Executable(const Executable&) = delete;
  Executable& operator=(const Executable&) = delete;

  const caf::actor& step_actor() const { return plan_->step_actor; }
  const ExecPlan& plan() const { return *plan_; }
  int num_nodes() const { return int(plan_->nodes.size()); }

 private:
  caf::actor_system* system_;
  std::shared_ptr<ExecPlan> plan_;
};

}  // namespace troupe
