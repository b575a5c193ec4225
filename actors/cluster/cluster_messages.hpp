#pragma once
// The messages between a cluster's master (a Session with a target) and its members'
// worker actors, and between the members themselves (docs/cluster.md, "How a step runs"):
//   master -> worker  (register_atom, RegisterGraph)            -> (code, message)
//                     (run_graph_atom, handle, step, feeds)     then later, to the master:
//   worker -> master  (run_done_atom, handle, step, RunGraphReply)
//   master -> worker  (abort_atom, handle, step, code, message) the step failed elsewhere
//                     (deregister_atom, handle)                 -> (code, message)
//   member -> member  (transfer_atom, RemoteValue)  to the peer's inbox, which answers
//                     (ack_atom, bytes)             to the sending outbox (its window).
// Everything that crosses is serialized by CAF from these plain types; tensors as raw bytes.
// Internal to actors/: includes CAF.
#include <caf/all.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "actors/cluster/tensor_transfer.hpp"
#include "actors/messages.hpp"

namespace troupe {

// A feed or a fetch: one message, its bytes written by CAF straight from the tensor and read
// straight into a tensor allocated for it (tensor_transfer.hpp's ChunkBytes).
using WireTensor = TensorChunk;

WireTensor to_wire(const Tensor& tensor);
// Throws data_loss naming `what` when the dtype, the shape and the bytes disagree.
Tensor from_wire(WireTensor& wire, const std::string& what);

// One partition of a registered signature, as the master cut it.
struct WirePartition {
  std::string device;          // the cluster's name of its device: /job:worker/task:1/device:CPU:0
  std::vector<uint8_t> graph;  // Cap'n Proto GraphDef (graph/graph_def.hpp)
  std::vector<int32_t> fetch_nodes, fetch_ports, fetch_slots;  // fetched here, as which local fetch
  std::vector<int32_t> targets;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WirePartition& x) {
  return f(caf::meta::type_name("troupe.WirePartition"), x.device, x.graph, x.fetch_nodes, x.fetch_ports,
           x.fetch_slots, x.targets);
}

// A task this one exchanges values with: where it listens, and which incarnation of it the
// master registered with (values of any other are refused).
struct TaskPeer {
  std::string task;  // "worker:1"
  std::string host;
  uint16_t port = 0;
  uint64_t incarnation = 0;
  caf::actor inbox;  // where values for it go (the master asked it; a worker busy registering
                     // could not answer a peer that asked)
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TaskPeer& x) {
  return f(caf::meta::type_name("troupe.TaskPeer"), x.task, x.host, x.port, x.incarnation, x.inbox);
}

// RegisterGraph: one task's share of a signature.
struct RegisterGraph {
  uint64_t handle = 0;   // chosen by the master; the same on every task of the signature
  std::string owner;     // who registers, for logs ("session of host pid 123")
  caf::actor owner_actor;  // monitored: its registrations go when it does
  std::vector<WirePartition> parts;
  std::vector<int32_t> arg_parts, arg_nodes;  // per local feed: its _Arg
  std::vector<std::string> fetch_names;       // per local fetch
  int32_t num_targets = 0;
  std::vector<TaskPeer> peers;
  std::vector<std::string> float16_keys;  // rendezvous keys of float32 values that cross as float16
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RegisterGraph& x) {
  return f(caf::meta::type_name("troupe.RegisterGraph"), x.handle, x.owner, x.owner_actor, x.parts, x.arg_parts,
           x.arg_nodes, x.fetch_names, x.num_targets, x.peers, x.float16_keys);
}

struct RunGraphReply {
  int32_t code = 0;  // ErrorCode
  std::string message;
  std::vector<WireTensor> fetches;  // per local fetch
  std::string device;               // the failed node's device, when a node failed
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RunGraphReply& x) {
  return f(caf::meta::type_name("troupe.RunGraphReply"), x.code, x.message, x.fetches, x.device);
}

// A value (or one chunk of it) on its way from a _Send to the _Recv of its rendezvous key in
// another process. The key is the fingerprint64 of the rendezvous key; the tag gives step, frame
// and iteration; `incarnation` is the sender's, so a value from before a restart is refused.
struct RemoteValue {
  uint64_t handle = 0;
  uint64_t key = 0;
  Tag tag;
  uint64_t incarnation = 0;
  bool dead = false;
  TensorChunk chunk;  // empty for a dead value
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RemoteValue& x) {
  return f(caf::meta::type_name("troupe.RemoteValue"), x.handle, x.key, x.tag, x.incarnation, x.dead, x.chunk);
}

// One step a task is running (status_atom): the registration it belongs to, how long it has
// run, and the task's nodes that wait in it.
struct StepStatus {
  uint64_t handle = 0;
  std::string owner;  // the registering session ("session of vm pid 24698")
  uint64_t step = 0;
  double seconds = 0;
  std::vector<WaitReport> waits;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepStatus& x) {
  return f(caf::meta::type_name("troupe.StepStatus"), x.handle, x.owner, x.step, x.seconds, x.waits);
}

using identify_atom = caf::atom_constant<caf::atom("identify")>;
using spec_atom = caf::atom_constant<caf::atom("spec")>;
// (agreement_atom) -> vector<string>: the member's spec as it started (ClusterSpec::agreement),
// which every master compares with its target's when it connects.
using agreement_atom = caf::atom_constant<caf::atom("agreement")>;
using inbox_atom = caf::atom_constant<caf::atom("inbox")>;
using register_atom = caf::atom_constant<caf::atom("register")>;
using deregister_atom = caf::atom_constant<caf::atom("dereg")>;
using run_graph_atom = caf::atom_constant<caf::atom("rungraph")>;
using run_done_atom = caf::atom_constant<caf::atom("rundone")>;
using transfer_atom = caf::atom_constant<caf::atom("transfer")>;
using ack_atom = caf::atom_constant<caf::atom("ack")>;
using transfer_stats_atom = caf::atom_constant<caf::atom("xstats")>;
using collective_atom = caf::atom_constant<caf::atom("collect")>;
// (take_over_atom, task) -> (task, incarnation, devices): a spare ("spare:0") becomes `task`,
// whose process is gone for good; (moved_atom, task, address, retired) tells a member that
// `task` now runs at `address` and that the spare `retired` is no task of its own any more.
using take_over_atom = caf::atom_constant<caf::atom("takeover")>;
using moved_atom = caf::atom_constant<caf::atom("moved")>;
// (step_waits_atom, handle, step) -> vector<WaitReport>: the task's nodes still waiting in that
// step of that registration (actors/trace/wait_chain.hpp follows them across tasks).
using step_waits_atom = caf::atom_constant<caf::atom("stepwaits")>;
// (status_atom) -> vector<StepStatus>: every step this task is running, with its waiting nodes
// (troupe-node --status).
using status_atom = caf::atom_constant<caf::atom("status")>;
// (peer_hello_atom, task, incarnation, inbox, answer, data_port, data_secret): sent by the member
// that made the connection between two peers, over it, to the other's worker (answer false),
// which answers the same way with its own (answer true): each watches, and sends values to, the
// `inbox` it got so, over a data connection (data_path.hpp) to `data_port` when that is not 0.
using peer_hello_atom = caf::atom_constant<caf::atom("peerhello")>;
// (peer_lost_atom, incarnation, why) to a worker: a data connection to or from that process broke;
// (peer_lost_atom, incarnation) to an inbox: what that process had half sent is dropped.
using peer_lost_atom = caf::atom_constant<caf::atom("peerlost")>;
// Tracing (core/trace.hpp): (clock_atom) -> int64_t, the member's trace::now_ns(), which the
// master's clock offset estimate reads; (trace_atom, handle, step) marks a step traced before its
// RunGraph; (trace_atom, handle, steps, from_ns, to_ns, shift_ns, pid) -> vector<string> ends
// those steps and takes their events as Chrome trace JSON objects (times on the member's clock;
// ts - shift_ns); (trace_atom, handle, step, true) ends it (a member's own backstop when the master never asks).
using clock_atom = caf::atom_constant<caf::atom("clock")>;
using trace_atom = caf::atom_constant<caf::atom("trace")>;

// Registers every type above (and the tensor chunks) with a process's CAF configuration, by the
// names every process uses.
void add_cluster_types(caf::actor_system_config& config);

}  // namespace troupe
