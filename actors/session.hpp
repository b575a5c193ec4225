#pragma once
// Session: the public entry point for running a graph.
//
//   auto s = Scope::root();
//   auto x = ops::placeholder(s, DType::float32, {2});
//   auto y = ops::mul(s, x, ops::constant(s, 3.0f));
//   Session session(s);
//   auto out = session.run({{x, Tensor::from_vector<float>({1, 2})}}, {y});
//
// run() prepares an executable for each signature (feeds, fetches, targets) the first time it
// is seen and reuses it afterwards. Several threads may call run() at once; each call is its
// own step, and at most `max_steps_in_flight` steps run at a time (the rest wait). A failed
// step throws troupe::Error naming the node, its op, its device and the cause; a feed of the
// wrong dtype or shape, an unknown name, or a fetch that cannot be computed is refused before
// the step starts. Variables live in the session's parameter shards and persist across runs;
// actors/state/saver.hpp saves them to a checkpoint and restores them.
// The graph may grow between runs but must not change while run() is preparing an executable.
#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/network.hpp"  // TlsFiles
#include "core/report.hpp"  // kWaitingNotice: how often a wait is told
#include "core/tensor.hpp"
#include "graph/scope.hpp"

namespace troupe {

// Tracing steps into a Chrome trace (docs/observability.md): every kernel's slice with its op,
// node, input shapes, step, frame and iteration; values crossing between processes with an arrow
// from sender to receiver; queue and input pipeline waits; memory in use per device. On a
// cluster, every task's share of a traced step, a process row per task, their clocks aligned to
// this process's.
struct TraceOptions {
  // Where the trace goes; empty: nothing is traced.
  std::string file;
  // The steps traced by number: run() calls counted from 1 in the order they start, `first_step`
  // to `last_step` (0: none; RunOptions::trace picks steps one at a time). The file is written
  // when step `last_step` ends, by write_trace(), and when the session ends if a step traced
  // since was not written.
  uint64_t first_step = 0, last_step = 0;
  // The most events kept (in the process while steps run, and in the file); more are counted
  // as left out in the file's otherData. About 100 bytes each in memory.
  std::size_t max_events = 1'000'000;
};

struct SessionOptions {
  // The cores Troupe may use, set by the first Session alive (later ones share them); 0: the
  // cores this process may use (its CPU affinity and cgroup quota: usable_cores()). Both kinds of threads follow from it: the scheduler's (inter-op) threads
  // run node actors, and a kernel's team (intra-op: oneDNN, OpenBLAS) is as wide as `threads`,
  // with teams taking turns (devices/cpu_threads.hpp), so the two never oversubscribe the cores.
  int threads = 0;
  // Overrides for experiments; 0 follows `threads`.
  int inter_op_threads = 0;
  int intra_op_threads = 0;
  int max_steps_in_flight = 16;  // back-pressure on concurrent run() calls
  bool allow_soft_placement = true;  // an op without a kernel on its requested device runs on the CPU
  // A deadline for every run() that sets none itself (TensorFlow's
  // ConfigProto.operation_timeout_in_ms); zero: none.
  std::chrono::milliseconds operation_timeout{0};
  // How many parameter shards (actors) hold the session's variables. Each variable lives on
  // one: round robin over the variables in the order the graph defines them, so the parts of
  // a partitioned variable (ops::partitioned_variable) spread over the shards. Updates of
  // variables on different shards run in parallel, and a checkpoint's save writes one data
  // file per shard, in parallel (actors/state/saver.hpp).
  int num_param_shards = 1;
  // Where the graph runs: "" (this process), or a cluster of troupe-node processes,
  // "troupe://host:port" naming any of its members (docs/cluster.md). On a cluster the graph is
  // placed over every task's devices (unconstrained nodes go to the target's task), each task's
  // partitions are registered with it once per signature, and run() runs one step over all of
  // them; variables live on the tasks they are placed on. The same program runs locally or on a
  // cluster by changing the target alone. A lost or hung task fails the step naming it within
  // about two connection timeouts; see docs/cluster.md, "When a node dies".
  std::string target;
  // A cluster session's network layer: heartbeats every `heartbeat`; a task silent for
  // `connection_timeout` is taken as lost.
  std::chrono::milliseconds heartbeat{200};
  std::chrono::milliseconds connection_timeout{1000};
  // A cluster with TLS (the spec's "tls" section): this process's identity, e.g.
  // spec.tls_for(task) in a task's own process or spec.tls_client() elsewhere. Empty: plain TCP.
  TlsFiles tls;
  // How long the first connection to every task may take (tasks still starting are retried).
  // While it waits the session says so, naming the task, once when the wait begins and every
  // 10 s after ("waiting for task ps:0 at 127.0.0.1:2222 (3 s): ..."), to `on_waiting`
  // (empty: standard error); past the bound the error names the task and the time waited.
  std::chrono::milliseconds cluster_startup_timeout{10000};
  std::function<void(const std::string&)> on_waiting;
  // A step still running after `slow_step_report` is reported (what describe_waiting says of it)
  // to `on_slow_step`, again after twice that, four times, ...; the step goes on (its deadline
  // is `operation_timeout` or RunOptions::timeout). Zero: never.
  std::chrono::milliseconds slow_step_report{60000};
  // Where the reports go; empty: standard error ("troupe: step 3 has run for 60.0 s and goes
  // on; stuck: ...").
  std::function<void(const std::string&)> on_slow_step;
  // Every float32 value crossing between tasks travels as float16 (lossy: relative error at
  // most 2^-11; TensorFlow whitepaper §5.5); Scope::with_float16_transfer does it for some ops.
  bool float16_transfer = false;
  // Chrome traces of chosen steps (TraceOptions above); tracing nothing costs nothing measurable.
  TraceOptions trace;
};

// Options of one run() call.
struct RunOptions {
  // The step's deadline (TensorFlow's RunOptions.timeout_in_ms); zero: the session's
  // operation_timeout. A step still running then is aborted on every node, and run() fails with
  // deadline_exceeded, naming the nodes that were still waiting and for what.
  std::chrono::milliseconds timeout{0};
  // Trace this step into SessionOptions::trace.file (which must be set), whatever its number.
  bool trace = false;
};

// "node:port", "node" (port 0), or an Output.
struct TensorName {
  std::string name;
  TensorName(const char* n) : name(n) {}
  TensorName(std::string n) : name(std::move(n)) {}
  TensorName(const Output& o) : name(o.name()) {}
};

// A node by name, by Output, or by Node*.
struct OpName {
  std::string name;
  OpName(const char* n) : name(n) {}
  OpName(std::string n) : name(std::move(n)) {}
  OpName(const Output& o) : name(o.node()->name) {}
  OpName(const Node* n) : name(n->name) {}
};

using FeedList = std::vector<std::pair<TensorName, Tensor>>;

// A device of this process as its device actor reports it.
struct DeviceInfo {
  std::string name;
  std::string description;
  std::size_t bytes_in_use = 0;
  // The most in use at once: exact where one thread allocates, else within 1 MiB per thread
  // allocating at the time (Allocator::peak_bytes).
  std::size_t peak_bytes = 0;
};

// One line of "who waits on whom" for a step that has not finished.
struct WaitingNode {
  std::string node;
  uint64_t step;
  int received;
  int expected;
  std::vector<std::string> missing;
};

// What crossed between one task of a cluster and the others since the task started (every
// session's values): values and bytes on the wire each way, and the values sent as float16
// (SessionOptions::float16_transfer) with the bytes that saved.
struct TaskTransfers {
  std::string task;  // "worker:0"
  uint64_t values_sent = 0, bytes_sent = 0;
  uint64_t values_received = 0, bytes_received = 0;
  uint64_t float16_values = 0, float16_bytes_saved = 0;
  uint64_t values_sent_direct = 0;  // of values_sent, those over a data connection of their own (not CAF's)
};

class SessionImpl;

// A Session runs in this process or on a cluster (SessionOptions::target): two implementations
// behind this one type (actors/session_impl.hpp).
class Session {
 public:
  explicit Session(std::shared_ptr<Graph> graph, SessionOptions options = {});
  explicit Session(const Scope& scope, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  std::vector<Tensor> run(const FeedList& feeds, const std::vector<TensorName>& fetches,
                          const std::vector<OpName>& targets = {}, const RunOptions& options = {});
  std::vector<Tensor> run(const std::vector<TensorName>& fetches) { return run({}, fetches, {}); }

  // Builds the executable of a signature now (pruning, placement, kernels: e.g. a reader op
  // loading its files) instead of on the first run; a later run with it starts at once.
  void prepare(const std::vector<TensorName>& feeds, const std::vector<TensorName>& fetches,
               const std::vector<OpName>& targets = {});

  // Every node of this process that holds a step whose inputs have not all arrived, with what
  // it still awaits: the explanation of a step that hangs. Empty when nothing is in flight.
  std::vector<WaitingNode> waiting_nodes() const;
  // The same as text, per step in flight: the stuck nodes first, the waits followed from node to
  // node (and on a cluster from task to task, every task asked) to what holds the step, then
  // each waiting node ("step 3: stuck: worker:0 'loss' waits for 'next:0' from ps:0, where
  // 'next' has 0 of 1 inputs, waits for queue 'q' to answer (...); nodes still waiting:\n  ...").
  // Empty when no step waits (locally) or none is in flight (on a cluster).
  std::string describe_waiting() const;

  // Every device of this process, from its device actor.
  std::vector<DeviceInfo> devices() const;

  // What the loops of every executable still hold: frames entered and not yet left, and
  // values saved for a loop's gradient and not yet popped. Both are 0 once no step runs; a
  // test that says loop state is freed checks it here.
  struct LoopState {
    std::size_t frames = 0;
    std::size_t saved_values = 0;
  };
  LoopState loop_state() const;

  // A cluster session's transfer statistics, per task (asked of each, bounded; a task that
  // does not answer is left out); empty for a local session.
  std::vector<TaskTransfers> transfer_stats() const;

  // Writes the steps traced so far to SessionOptions::trace.file (Chrome's trace format);
  // throws failed_precondition when the session traces nothing, or naming the file when it
  // cannot be written.
  void write_trace();
  int num_executables() const;
  int steps_in_flight() const;
  // Names of the variables initialised in this session's parameter shards, sorted.
  std::vector<std::string> variable_names() const;
  const Graph& graph() const;
  const SessionOptions& options() const;

 private:
  friend SessionImpl& session_impl(const Session& session);
  std::unique_ptr<SessionImpl> impl_;
};

}  // namespace troupe
