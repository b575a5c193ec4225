#include "actors/executor/executable.hpp"

#include <algorithm>
#include <exception>
#include <latch>
#include <numeric>
#include <set>
#include <system_error>
#include <thread>

#include "actors/executor/node.hpp"
#include "actors/executor/spawn_node.hpp"
#include "actors/runtime.hpp"
#include "actors/executor/step_actor.hpp"
#include "core/fingerprint.hpp"
#include "core/huge_pages.hpp"
#include "core/thread_heap.hpp"
#include "devices/cpu_threads.hpp"
#include "graph/partition.hpp"
#include "ops/kernel.hpp"
#include "ops/state/variable.hpp"

namespace troupe {
namespace {

// Graphs of at least this many active nodes have their node state collapsed into huge pages
// (core/huge_pages.hpp); a smaller one's few MiB stay within the TLB's reach anyway.
constexpr std::size_t kHugePageNodes = 2048;

// Spawning a node's actor writes about 2.5 KiB of fresh heap (CAF's actor, the node's state,
// its mailbox's room), and each fresh page costs a fault, which in a virtual machine takes
// microseconds: the faults, not the constructors, are most of spawning a large graph's
// actors. So a large partition's actors are spawned by several threads at once (each faults
// its own pages, from its own malloc arena), one slice of at least this many active nodes each.
constexpr std::size_t kSpawnSliceNodes = 2048;
// A thread's malloc arena (but the first thread's) grows by a page at a time, one mprotect call
// each (core/thread_heap.hpp): each slice's thread makes room for this much per node first, in
// huge pages when the graph's node state goes there anyway (kHugePageNodes).
constexpr std::size_t kSpawnBytesPerNode = 3072;
// At most this many threads spawn a partition's actors.
constexpr int kSpawnThreads = 4;

// Calls `spawn(from, to, hot_here)` over the node ids [0, n) in slices, one per thread on up to
// kSpawnThreads new threads (no more than the cores this process may use; the calling thread
// waits for them: its heap may be the process's main one, whose room cannot be made ahead),
// then appends each slice's `hot_here` to `hot` in slice order; a partition with too few active
// nodes for two slices is spawned by the calling thread. `huge`: each thread's room goes into
// huge pages. Rethrows the first exception a slice threw, once every slice has ended.
template <class Spawn>
void spawn_slices(int n, std::size_t active, bool huge, std::vector<const void*>& hot, Spawn&& spawn) {
  const int slices = int(std::min<std::size_t>(active / kSpawnSliceNodes, kSpawnThreads));
  const int threads = slices < 2 ? 1 : std::clamp(usable_cores(), 1, slices);
  if (threads == 1) {
    thread_heap::reserve(active * kSpawnBytesPerNode, huge);
    spawn(0, n, hot);
    return;
  }
  std::vector<std::vector<const void*>> hot_of(static_cast<std::size_t>(threads));
  std::vector<std::exception_ptr> error(static_cast<std::size_t>(threads));
  auto slice = [&](int t) {
    try {
      thread_heap::reserve(active / std::size_t(threads) * kSpawnBytesPerNode, huge);
      spawn(int(int64_t(n) * t / threads), int(int64_t(n) * (t + 1) / threads), hot_of[std::size_t(t)]);
    } catch (...) {
      error[std::size_t(t)] = std::current_exception();
    }
  };
  std::vector<std::thread> helpers;
  for (int t = 0; t < threads; ++t) {
    try {
      helpers.emplace_back(slice, t);
    } catch (const std::system_error&) {  // no thread to be had: this one spawns the slice
      slice(t);
    }
  }
  for (auto& h : helpers) h.join();
  for (auto& e : error)
    if (e) std::rethrow_exception(e);
  for (auto& h : hot_of) hot.insert(hot.end(), h.begin(), h.end());
}

// ---- plan ----------------------------------------------------------------------------

using PartSignature = PartitionSet::Signature;

struct PartPlan {
  std::shared_ptr<ExecPlan> plan;
  std::vector<std::unique_ptr<OpKernel>> kernels;  // per node, for the spawn step
  // Per node with replicas (NodePlan::replicas): the kernels of replicas 1 on.
  std::map<int, std::vector<std::unique_ptr<OpKernel>>> replica_kernels;
  std::vector<bool> forwards;  // pass-through nodes whose consumers read their producer
};

// The loops of a partition whose iterations may run side by side on different workers (node.hpp,
// NodeActor::spread), by frame name, each with its IterationSpread (owned by `p`): those that
// let iterations overlap (parallel_iterations > 1), lie on this partition's device alone (no
// _Recv in the loop: what other partitions carry from iteration to iteration is not seen here)
// and carry only small values from one iteration to the next (a loop carrying a large one, an
// RNN's state, runs each iteration after the last wherever it is spread, and would move the value
// between cores every time). And, in those loops, what the next iteration waits for: the nodes a
// NextIteration reads, back to the start of the iteration (its Merges and loop invariants).
// `side`: per node, NodePlan::side, for the loops that let iterations overlap but do not spread.
struct LoopSpreads {
  std::map<std::string, IterationSpread*> of;
  std::vector<bool> carried;  // per node
  std::vector<bool> side;     // per node
};

LoopSpreads loop_spreads(const Graph& g, const std::vector<NodeKind>& kinds, ExecPlan& p) {
  constexpr int64_t kSmallCarried = 1024;  // bytes
  std::map<std::string, bool> may_spread;
  std::map<std::string, int64_t> window;  // per such loop, its parallel_iterations
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (kinds[std::size_t(id)] != NodeKind::enter) continue;
    if (const int64_t parallel = get_attr_or<int64_t>(n.attrs, "parallel_iterations", 1); parallel > 1) {
      const std::string frame = get_attr<std::string>(n.attrs, "frame_name", n.name);
      may_spread.try_emplace(frame, true);
      window[frame] = parallel;
    }
  }
  for (int id = 0; id < g.size() && !may_spread.empty(); ++id) {
    const Node& n = g.node(id);
    if (n.op != "NextIteration" && n.op != "_Recv") continue;
    auto it = may_spread.find(loop_frame(n));
    if (it == may_spread.end()) continue;
    const int64_t elements = n.op == "_Recv" ? -1 : n.output_shapes[0].num_elements();
    if (elements < 0 || elements * int64_t(size_of(n.output_types[0])) > kSmallCarried) it->second = false;
  }
  LoopSpreads out;
  for (auto& [frame, ok] : may_spread)
    if (ok) {
      out.of[frame] = p.spreads.emplace_back(std::make_unique<IterationSpread>()).get();
      out.of[frame]->window = int(std::min<int64_t>(window[frame], INT32_MAX));
    }
  out.carried.assign(std::size_t(g.size()), false);
  out.side.assign(std::size_t(g.size()), false);
  if (may_spread.empty()) return out;
  std::vector<int> stack;
  for (int id = 0; id < g.size(); ++id)
    if (g.node(id).op == "NextIteration" && may_spread.count(loop_frame(g.node(id)))) stack.push_back(id);
  while (!stack.empty()) {
    const int id = stack.back();
    stack.pop_back();
    if (out.carried[id]) continue;
    out.carried[id] = true;
    const Node& n = g.node(id);
    const NodeKind kind = kinds[std::size_t(id)];
    if (kind == NodeKind::merge || kind == NodeKind::loop_merge || kind == NodeKind::enter ||
        kind == NodeKind::loop_invariant)
      continue;
    for (auto& in : n.inputs)
      if (loop_frame(g.node(in.node)) == loop_frame(n)) stack.push_back(in.node);
    // A NextIteration's control input is its loop's iteration gate: the count of finished
    // iterations that holds it back at most parallel_iterations ahead, not what it passes on.
    if (n.op != "NextIteration")
      for (int c : n.control_inputs)
        if (loop_frame(g.node(c)) == loop_frame(n)) stack.push_back(c);
  }
  for (int id = 0; id < g.size(); ++id)
    if (kinds[std::size_t(id)] == NodeKind::kernel && !out.carried[id])
      if (auto it = may_spread.find(loop_frame(g.node(id))); it != may_spread.end() && !it->second) out.side[id] = true;
  return out;
}

// Per node of `p` that is a control input of an active NextIteration (its loop's iteration
// gate), those NextIterations: one pass over the nodes, however many loops and Exits.
std::map<int, std::vector<int>> next_iterations_by_gate(const ExecPlan& p) {
  std::map<int, std::vector<int>> out;
  for (int id = 0; id < int(p.nodes.size()); ++id) {
    const NodePlan& np = p.nodes[std::size_t(id)];
    if (np.kind == NodeKind::next_iteration && np.active)
      for (int c : p.graph->node(id).control_inputs) out[c].push_back(id);
  }
  return out;
}

// Whether every input and output of `n` has a shape known now of at most
// NodePlan::kTinyElements elements and its op keeps no state (NodePlan::tiny): a stateful op
// (a random draw, a test's probe that waits) may do any amount of work on a scalar.
bool tiny_inputs_and_outputs(const Graph& g, const Node& n) {
  if (n.op_def->stateful) return false;
  auto tiny = [](const PartialShape& s) {
    const int64_t elements = s.num_elements();  // -1 unless fully defined
    return elements >= 0 && elements <= NodePlan::kTinyElements;
  };
  for (const PartialShape& s : n.output_shapes)
    if (!tiny(s)) return false;
  for (const Endpoint& in : n.inputs)
    if (!tiny(g.node(in.node).output_shapes[std::size_t(in.port)])) return false;
  return true;
}

// Per loop (frame name) of a partition: its Exits, and its Enters that are not loop invariants.
struct LoopEnds {
  std::map<std::string, int> exits_of;
  std::map<std::string, int> enters_of;
};

LoopEnds loop_ends(const Graph& g, const std::vector<NodeKind>& kinds) {
  LoopEnds out;
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (n.op == "Exit") ++out.exits_of[loop_frame(g.node(n.inputs[0].node))];
    if (kinds[std::size_t(id)] == NodeKind::enter) ++out.enters_of[get_attr<std::string>(n.attrs, "frame_name", n.name)];
  }
  return out;
}

// Constant inputs are handed to their consumers once, here, instead of travelling as a
// message every step: a Const without control inputs has the same value in every step and
// frame.
bool hoistable(const Graph& g, int id) { return is_constant_value(g.node(id)); }

// Per node, whether it gets an actor: a Const left with nothing to feed (no fetch or target,
// `reported`; no control consumer) gets none.
std::vector<bool> active_nodes(const Graph& g, const std::vector<bool>& reported) {
  std::vector<bool> active(std::size_t(g.size()), true);
  std::vector<bool> still_needed = reported;
  for (int id = 0; id < g.size(); ++id) {
    for (int c : g.node(id).control_inputs) still_needed[c] = true;
    if (g.node(id).op_def->fires_on_first_live_input || g.node(id).op_def->frame_op)  // they see constants as messages
      for (auto& in : g.node(id).inputs) still_needed[in.node] = true;
  }
  for (int id = 0; id < g.size(); ++id)
    if (hoistable(g, id) && !still_needed[id]) active[id] = false;
  return active;
}

// Node `id`'s inputs in `p` (its kind and activity set): its data slots, the hoisted constants
// among them, its control inputs, and the start signal of a node that has no other input.
void plan_inputs(ExecPlan& p, int id) {
  const Graph& g = *p.graph;
  const Node& n = g.node(id);
  NodePlan& np = p.nodes[id];
  // An _Arg takes its feed, a _Recv its value, as a message on slot 0.
  const bool takes_message = n.op == "_Arg" || np.kind == NodeKind::recv;
  np.num_inputs = takes_message ? 1 : int(n.inputs.size());
  np.num_controls = int(n.control_inputs.size());
  np.num_fixed = 0;
  if (takes_message) return;
  for (std::size_t slot = 0; slot < n.inputs.size(); ++slot) {
    auto in = n.inputs[slot];
    if (hoistable(g, in.node) && !n.op_def->fires_on_first_live_input && !n.op_def->frame_op) {
      np.fixed_inputs.resize(std::size_t(np.num_inputs));
      np.fixed_inputs[slot] = get_attr<Tensor>(g.node(in.node).attrs, "value", g.node(in.node).name);
      ++np.num_fixed;
    }
  }
  if (np.active && np.num_inputs == np.num_fixed && n.control_inputs.empty()) {
    np.num_controls = 1;  // the start signal
    p.sources.push_back(id);
  }
}

// Node `id`'s fields of the frame kinds, its loop's spread, and its StatePlan if it is of the
// stack, queue or variable kinds.
void plan_kind_fields(ExecPlan& p, int id, const LoopEnds& ends, const LoopSpreads& spreads, const ShardOf& shard_of,
                      const ExecutableOptions& options) {
  const Graph& g = *p.graph;
  const Node& n = g.node(id);
  NodePlan& np = p.nodes[id];
  if (is_loop_kind(np.kind)) {
    LoopPlan& lp = p.loops[id];  // made now, before the actors that point at it
    if (np.kind == NodeKind::enter) {
      const std::string frame = get_attr<std::string>(n.attrs, "frame_name", n.name);
      lp.frame_exits = ends.exits_of.count(frame) ? ends.exits_of.at(frame) : 0;
      lp.frame_enters = ends.enters_of.count(frame) ? ends.enters_of.at(frame) : 0;
    }
    if (np.kind == NodeKind::enter || np.kind == NodeKind::loop_invariant)
      lp.frame_hash = fingerprint64(get_attr<std::string>(n.attrs, "frame_name", n.name));
    if (np.kind == NodeKind::next_iteration)
      lp.parallel_iterations = int(get_attr_or<int64_t>(n.attrs, "parallel_iterations", 1));
  }
  if (np.kind == NodeKind::stack_push || np.kind == NodeKind::stack_pop)
    p.states[id].stack_hash = fingerprint64(get_attr<std::string>(n.attrs, "stack_name", n.name));
  // An Enter takes its values in the frame around the loop: it stays where they come.
  if (!spreads.of.empty() && np.active && np.kind != NodeKind::enter)
    if (auto it = spreads.of.find(loop_frame(n)); it != spreads.of.end()) {
      np.spread = it->second;
      np.carried = spreads.carried[id];
    }
  np.side = spreads.side[id];
  np.in_loop = np.kind == NodeKind::kernel && !loop_frame(n).empty();
  np.tiny = np.kind == NodeKind::kernel && tiny_inputs_and_outputs(g, n);
  if (np.kind == NodeKind::queue) p.states[id].queue_op = queue_op_of(n);
  if (np.kind == NodeKind::variable) p.states[id].variable_op = variable_op_of(n);
  if (np.kind == NodeKind::queue && np.active) {
    if (!options.runtime) fail(ErrorCode::internal, "{}: no runtime to find its queue in", np.where());
    p.states[id].queue = options.runtime->queue(QueueSpec::from(n.attrs, n.name));
  }
  if (n.op_def->variable_op && np.active) p.states[id].shard = shard_of(variable_name(n));
}

// The kernel of active kernel node `id` (on `device`), and those of its replicas.
void create_kernels(PartPlan& out, int id, const Device* device, int workers) {
  NodePlan& np = out.plan->nodes[id];
  const Node& n = *np.node;
  if (!np.active || np.kind != NodeKind::kernel) return;
  if (np.spread && !np.carried && !n.op_def->stateful && device->type() == DeviceType::cpu && workers > 1)
    np.replicas = workers;
  try {
    out.kernels[id] = KernelRegistry::global().create(n, device->type());
    for (int r = 1; r < np.replicas; ++r)
      out.replica_kernels[id].push_back(KernelRegistry::global().create(n, device->type()));
  } catch (const Error& e) {
    throw Error(e.code(), np.where() + ": " + e.what());
  }
}

// Pass-through nodes (Identity, LoopCond) that take one value by message and have no control
// edges and no fetch (`reported`) cost a hop and a firing per value and change nothing: their
// consumers are wired to the producer instead, and they get no actor. (A loop's iteration has two.)
void find_forwards(PartPlan& out, const std::vector<bool>& reported) {
  ExecPlan& p = *out.plan;
  const Graph& g = *p.graph;
  out.forwards.assign(std::size_t(g.size()), false);
  std::vector<bool> controls(std::size_t(g.size()), false);  // a control input of some node
  for (int id = 0; id < g.size(); ++id)
    for (int c : g.node(id).control_inputs) controls[c] = true;
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (p.nodes[id].active && (n.op == "Identity" || n.op == "LoopCond") && n.inputs.size() == 1 &&
        !p.nodes[id].is_fixed(0) && n.control_inputs.empty() && !controls[id] && !reported[id]) {
      out.forwards[id] = true;
      p.nodes[id].active = false;
      out.kernels[id].reset();
    }
  }
}

// The plan of one partition, from its graph alone; `workers`: the scheduler's threads.
PartPlan plan_partition(const Partition& part, const PartSignature& signature, const ShardOf& shard_of,
                        const ExecutableOptions& options, int workers) {
  PartPlan out;
  out.plan = std::make_shared<ExecPlan>();
  ExecPlan& p = *out.plan;
  p.device = part.device;
  p.graph = part.graph;
  const Graph& g = *p.graph;
  const Device* device = options.find_device ? options.find_device(part.device) : DeviceRegistry::instance().find(part.device);
  if (!device) fail(ErrorCode::internal, "a partition for {}, which this process does not have", part.device);
  p.nodes.resize(std::size_t(g.size()));

  std::vector<NodeKind> kinds(std::size_t(g.size()));  // each node's, found once
  for (int id = 0; id < g.size(); ++id) kinds[std::size_t(id)] = kind_of(g, g.node(id));
  const LoopEnds ends = loop_ends(g, kinds);
  const LoopSpreads spreads = loop_spreads(g, kinds, p);
  std::vector<bool> reported(std::size_t(g.size()), false);  // fetched, or a target
  for (auto& f : signature.fetches) reported[f.first.node] = true;
  for (int t : signature.targets) reported[t] = true;
  const std::vector<bool> active = active_nodes(g, reported);

  out.kernels.resize(std::size_t(g.size()));
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    NodePlan& np = p.nodes[id];
    np.node = &n;
    np.device = device;
    np.graph = &g;
    np.device_name = &p.device;
    np.active = active[id];
    np.kind = kinds[std::size_t(id)];
    plan_inputs(p, id);
    // A _Send has no outputs in its graph; its one target is the _Recv of its key (wire).
    np.outputs.resize(std::size_t(np.kind == NodeKind::send ? 1 : n.num_outputs()));
    // An Exit counts each control message as one finished iteration (exit_node.hpp): two
    // control inputs would count every iteration twice.
    if (np.kind == NodeKind::exit && n.control_inputs.size() > 1)
      fail(ErrorCode::internal, "{} has {} control inputs; an Exit takes at most one (its loop's iteration gate)",
           np.where(), n.control_inputs.size());
    plan_kind_fields(p, id, ends, spreads, shard_of, options);
    create_kernels(out, id, device, workers);
  }
  find_forwards(out, reported);
  return out;
}

// ---- wire -----------------------------------------------------------------------------

// Node `id` of `p` as the consumer of an output at `slot`: into its mailbox when it runs on
// the fast path (node.hpp), else by CAF message.
Target target_of(const ExecPlan& p, int id, uint32_t slot, bool drop_dead = false, bool drop_true = false) {
  Target t{p.actors[std::size_t(id)], slot, drop_dead, drop_true};
  t.node = p.fast[std::size_t(id)];
  if (const auto& replicas = p.nodes[std::size_t(id)].replica_nodes; !replicas.empty()) {
    t.replicas = replicas.data();
    t.replica_count = uint16_t(replicas.size());
  }
  return t;
}

// Within one partition: each data input of an active node to its producer's output (past
// pass-through nodes), each control input to its source.
void wire_partition(ExecPlan& p, const std::vector<bool>& forwards) {
  const Graph& g = *p.graph;
  auto producer_of = [&](Endpoint e) {
    while (forwards[e.node]) e = g.node(e.node).inputs[0];
    return e;
  };
  // A gated Exit learns that every iteration has finished from the NextIterations its loop's
  // gate tells (they free their gate state then, NextIterationNode), once per frame, not from
  // the gate itself every iteration: on two workers, that would be a message from the worker
  // that ran the iteration to the one that ran the Exit last, and a turn of the Exit, each
  // iteration.
  // So the gate's edge to it is not wired below (loop_end_signals).
  std::optional<std::map<int, std::vector<int>>> gated;  // made at the first Exit with a control input
  for (int id = 0; id < g.size(); ++id) {
    NodePlan& np = p.nodes[id];
    if (np.kind != NodeKind::exit || !np.active || g.node(id).control_inputs.size() != 1) continue;
    if (!gated) gated = next_iterations_by_gate(p);
    const auto it = gated->find(g.node(id).control_inputs[0]);
    if (it == gated->end()) continue;  // no NextIteration here hears its gate (a partition's control loop)
    p.loops.at(id).loop_end_signals = int(it->second.size());
    for (int next : it->second) p.loops.at(next).loop_end.push_back(target_of(p, id, kControlSlot));
  }
  // A loop invariant whose control input (the start of each iteration) is its loop's first
  // Merge here is served by that Merge (LoopPlan::hosted): its value and the LoopCond go there,
  // and the Merge's control edge to it is not wired. Per node: the Merge serving it (-1: none)
  // and its index among those the Merge serves.
  std::vector<int> hosted_by(std::size_t(g.size()), -1);
  std::vector<uint32_t> hosted_slot(std::size_t(g.size()), 0);
  for (int id = 0; id < g.size(); ++id) {
    NodePlan& np = p.nodes[id];
    if (np.kind != NodeKind::loop_invariant || !np.active || g.node(id).control_inputs.size() != 1) continue;
    const int merge = g.node(id).control_inputs[0];
    NodePlan& mp = p.nodes[std::size_t(merge)];
    if (mp.kind != NodeKind::loop_merge || !mp.active) continue;
    std::vector<int>& served = p.hosted[merge];
    hosted_by[id] = merge;
    hosted_slot[id] = uint32_t(served.size());
    served.push_back(id);
    LoopPlan& merge_plan = p.loops.at(merge);
    merge_plan.hosted = &served;  // a map's element stays where it is
    merge_plan.frame_hash = p.loops.at(id).frame_hash;  // the invariant's frame: the Merge's own
  }
  std::set<std::pair<int, Endpoint>> wired_ends;  // (Merge, LoopCond's producer) wired
  // Calls data(from, id, slot) for each data input of an active node that comes by message, and
  // control(c, id) for each of its control inputs.
  auto each_edge = [&](auto&& data, auto&& control) {
    for (int id = 0; id < g.size(); ++id) {
      const Node& n = g.node(id);
      if (!p.nodes[id].active) continue;
      for (int slot = 0; slot < int(n.inputs.size()); ++slot)
        if (!p.nodes[id].is_fixed(slot)) data(producer_of(n.inputs[slot]), id, slot);
      if (p.nodes[id].kind == NodeKind::exit && p.loops.at(id).loop_end_signals > 0)
        continue;  // its gate's NextIterations tell it (loop_end)
      for (int c : n.control_inputs) control(c, id);
    }
  };
  // Each output's and each node's control consumers counted first: every vector of targets gets
  // its room once (a large graph's set-up pays for each reallocation in fresh memory).
  std::vector<std::size_t> first_port(std::size_t(g.size()) + 1, 0);
  for (int id = 0; id < g.size(); ++id) first_port[id + 1] = first_port[id] + p.nodes[id].outputs.size();
  std::vector<uint32_t> data_count(first_port.back(), 0), control_count(std::size_t(g.size()), 0);
  each_edge([&](Endpoint from, int, int) { ++data_count[first_port[from.node] + std::size_t(from.port)]; },
            [&](int c, int) { ++control_count[c]; });
  for (int id = 0; id < g.size(); ++id) {
    NodePlan& np = p.nodes[id];
    for (std::size_t port = 0; port < np.outputs.size(); ++port) np.outputs[port].reserve(data_count[first_port[id] + port]);
    np.control_outputs.reserve(control_count[id]);
  }
  each_edge(
      [&](Endpoint from, int id, int slot) {
        const NodeKind kind = p.nodes[id].kind;
        const bool exit = kind == NodeKind::exit;
        const bool pred = (exit || kind == NodeKind::loop_invariant) && slot == 1;  // the LoopCond
        auto& targets = p.nodes[from.node].outputs[from.port];
        if (const int host = hosted_by[id]; host >= 0) {
          if (slot == 0) {
            targets.push_back(target_of(p, host, LoopPlan::kInvariantSlot + hosted_slot[id]));
          } else if (wired_ends.emplace(host, from).second) {  // the frame's end once, not per invariant
            targets.push_back(target_of(p, host, LoopPlan::kLoopEndSlot, false, pred));
            ++p.loops.at(host).loop_end_inputs;
          }
        } else {
          targets.push_back(target_of(p, id, uint32_t(slot), exit && slot == 0, pred));
        }
      },
      [&](int c, int id) {
        if (hosted_by[id] != c) p.nodes[c].control_outputs.push_back(target_of(p, id, kControlSlot));
      });
}

// Each _Send to where the rendezvous says: the _Recv of its key, in whichever partition that is,
// or beyond this executable; then the rendezvous is given those _Recvs' actors.
void wire_transfers(const std::vector<std::shared_ptr<ExecPlan>>& parts, Rendezvous& rendezvous) {
  std::map<std::string, Target> recv_of;
  for (auto& p : parts)
    for (int id = 0; id < int(p->nodes.size()); ++id)
      if (p->nodes[id].kind == NodeKind::recv) recv_of[rendezvous_key(p->graph->node(id))] = target_of(*p, id, 0);
  for (auto& p : parts)
    for (int id = 0; id < int(p->nodes.size()); ++id) {
      if (p->nodes[id].kind != NodeKind::send) continue;
      const std::string key = rendezvous_key(p->graph->node(id));
      auto it = recv_of.find(key);
      p->nodes[id].outputs[0].push_back(
          rendezvous.resolve(key, it == recv_of.end() ? nullptr : &it->second, p->nodes[id].where()));
    }
  std::map<std::string, caf::actor> recvs;
  for (auto& [key, target] : recv_of)
    if (target.actor) recvs.emplace(key, target.actor);
  rendezvous.bind(std::move(recvs));
}

}  // namespace

void StackStore::push(uint64_t step, uint64_t stack, Path path, Value value) {
  std::lock_guard<std::mutex> lock(mutex_);
  values_[{step, stack, std::move(path)}] = std::move(value);
}

Value StackStore::pop(uint64_t step, uint64_t stack, const Path& path) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = values_.find({step, stack, path});
  if (it == values_.end()) {
    std::string at;
    for (int64_t k : path) at += (at.empty() ? "" : ", ") + std::to_string(k);
    fail(ErrorCode::internal, "the forward loop saved no value for its iteration ({})", at);
  }
  Value v = std::move(it->second);
  values_.erase(it);
  return v;
}

void StackStore::drop_step(uint64_t step) {
  std::lock_guard<std::mutex> lock(mutex_);
  values_.erase(values_.lower_bound({step, 0, Path{}}), values_.lower_bound({step + 1, 0, Path{}}));
}

std::size_t StackStore::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return values_.size();
}

std::string NodePlan::where() const { return node->describe() + " on " + *device_name; }

std::string NodePlan::input_name(int slot) const {
  const Node& n = *node;
  if (n.op == "_Arg") return "feed " + std::to_string(get_attr<int64_t>(n.attrs, "index", n.name));
  const WaitSource source = input_source(slot);
  if (kind == NodeKind::recv) return fmt::format("{} from {}", source.tensor, source.device);
  // An input a _Recv brings says from where: a wait report then needs no other lookup.
  const Node& producer = graph->node(n.inputs[std::size_t(slot)].node);
  if (producer.op != "_Recv") return source.tensor;
  return fmt::format("{} (from {})", source.tensor, get_attr<std::string>(producer.attrs, "send_device", producer.name));
}

WaitSource NodePlan::input_source(int slot) const {
  const Node& n = *node;
  if (n.op == "_Arg") return {};
  if (kind == NodeKind::recv) {
    const std::string tensor = get_attr<std::string>(n.attrs, "tensor_name", n.name);
    return {get_attr<std::string>(n.attrs, "send_device", n.name), tensor.substr(0, tensor.rfind(':')), tensor};
  }
  const Endpoint in = n.inputs[std::size_t(slot)];
  const Node& producer = graph->node(in.node);
  return {"", producer.name, tensor_name(producer, in.port)};
}

Executable::Executable(caf::actor_system& system, const Graph& graph,
                       const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                       const std::vector<int>& targets, const ShardOf& shard_of,
                       const ExecutableOptions& options)
    : system_(&system) {
  SignaturePlacement where = local_placement();
  where.allow_soft_placement = options.allow_soft_placement;
  where.policy = options.placement_policy;
  build(place_signature(graph, feeds, fetches, targets, where).whole(), shard_of, options);
}

Executable::Executable(caf::actor_system& system, PartitionSet set, const ShardOf& shard_of,
                       const ExecutableOptions& options)
    : system_(&system) {
  build(std::move(set), shard_of, options);
}

namespace {

// spawn: the actors of `part` (`active` of its nodes active), every node's own first, a large
// partition's on several threads (spawn_slices()), then the other replicas of nodes with
// several. What a step reads of them goes into `hot` when `huge` (core/huge_pages.hpp).
void spawn_partition(caf::actor_system& system, PartPlan& part, std::size_t active, const caf::actor& step_actor,
                     bool huge, std::vector<const void*>& hot) {
  ExecPlan& p = *part.plan;
  p.step_actor = step_actor;
  p.actors.resize(p.nodes.size());  // each node's own actor at its index (none for an inactive node)
  p.fast.assign(p.nodes.size(), nullptr);
  // One actor of node `id` (replica 0: its own), into `into`; its fast-path node, if it runs
  // there. What a step reads of it goes into `hot_here`.
  auto spawn = [&](int id, std::unique_ptr<OpKernel> kernel, int replica, caf::actor& into,
                   std::vector<const void*>& hot_here) -> NodeActor* {
    if (huge) hot_here.push_back(kernel.get());
    auto [actor, node] = spawn_node(system, std::shared_ptr<const ExecPlan>(part.plan), id, std::move(kernel), replica);
    into = std::move(actor);
    if (huge) hot_here.push_back(caf::actor_cast<caf::abstract_actor*>(into));
    return node->fast() ? node : nullptr;
  };
  spawn_slices(int(p.nodes.size()), active, huge, hot, [&](int from, int to, std::vector<const void*>& hot_here) {
    for (int id = from; id < to; ++id) {
      if (!p.nodes[id].active) continue;
      if (huge) hot_here.push_back(&p.nodes[id]);
      p.fast[id] = spawn(id, std::move(part.kernels[id]), 0, p.actors[id], hot_here);
    }
  });
  for (auto& [id, kernels] : part.replica_kernels) {
    NodePlan& np = p.nodes[std::size_t(id)];
    np.replica_nodes.push_back(p.fast[std::size_t(id)]);
    for (std::size_t r = 0; r < kernels.size(); ++r) {
      p.actors.emplace_back();
      np.replica_nodes.push_back(spawn(id, std::move(kernels[r]), int(r) + 1, p.actors.back(), hot));
      p.fast.push_back(np.replica_nodes.back());
    }
  }
}

// wire: each output to its consumers' actors, each _Send where `rendezvous` says, and the
// fetches, the targets and the awaited _Sends to the step actor.
void wire_step(std::vector<PartPlan>& parts, const std::vector<PartSignature>& signatures, const caf::actor& step_actor,
               Rendezvous& rendezvous, StepPlan& step) {
  for (PartPlan& part : parts) wire_partition(*part.plan, part.forwards);
  wire_transfers(step.parts, rendezvous);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    ExecPlan& p = *parts[i].plan;
    for (auto& [f, index] : signatures[i].fetches) p.nodes[f.node].outputs[f.port].push_back({step_actor, uint32_t(index)});
    for (int t : signatures[i].targets) p.nodes[t].control_outputs.push_back({step_actor, kControlSlot});
    for (int id = 0; id < int(p.nodes.size()); ++id)
      if (p.nodes[id].kind == NodeKind::send && rendezvous.awaits(p.graph->node(id))) {
        p.nodes[id].control_outputs.push_back({step_actor, kControlSlot});
        ++step.num_awaited_sends;
      }
  }
}

}  // namespace

void Executable::build(PartitionSet set, const ShardOf& shard_of, const ExecutableOptions& options) {
  caf::actor_system& system = *system_;
  // plan
  plan_ = std::make_shared<StepPlan>();
  StepPlan& step = *plan_;
  const std::vector<PartSignature>& signatures = set.signatures;
  step.fetch_names = set.fetch_names;
  step.args = set.args;
  step.num_fetches = int(set.fetch_names.size());
  step.num_targets = set.num_targets;
  std::shared_ptr<Rendezvous> rendezvous = options.rendezvous ? options.rendezvous : std::make_shared<LocalRendezvous>();
  step.rendezvous = rendezvous;
  static std::atomic<uint64_t> next_trace_key{1};
  trace_key_ = options.trace_key ? options.trace_key : next_trace_key.fetch_add(1);
  std::vector<PartPlan> parts;
  for (std::size_t i = 0; i < set.parts.size(); ++i) {
    parts.push_back(plan_partition(set.parts[i], signatures[i], shard_of, options, int(system.scheduler().num_workers())));
    parts.back().plan->trace_key = trace_key_;
    step.parts.push_back(parts.back().plan);
  }

  // spawn: actors first, then the wiring that names them; nothing runs before the first step.
  step_actor_ = system.spawn(troupe::step_actor, std::shared_ptr<const StepPlan>(plan_));
  std::vector<std::size_t> active_of(parts.size(), 0);  // each partition's active nodes
  for (std::size_t i = 0; i < parts.size(); ++i)
    for (auto& n : parts[i].plan->nodes) active_of[i] += n.active;
  const std::size_t active = std::accumulate(active_of.begin(), active_of.end(), std::size_t(0));
  // A large graph's node state goes into huge pages (core/huge_pages.hpp): what each node's
  // turn reads, by where it lies.
  std::vector<const void*> hot;
  const bool huge = active >= kHugePageNodes && huge_pages::enabled();
  const auto step_target = caf::actor_cast<caf::actor>(step_actor_);  // nodes send to it untyped (fast path)
  for (std::size_t i = 0; i < parts.size(); ++i) spawn_partition(system, parts[i], active_of[i], step_target, huge, hot);
  wire_step(parts, signatures, step_target, *rendezvous, step);
  if (huge) {
    for (PartPlan& part : parts)
      for (const NodePlan& n : part.plan->nodes)
        for (const auto& targets : n.outputs) hot.push_back(targets.data());
    std::lock_guard<std::mutex> lock(hot_mutex_);
    hot_ = std::move(hot);
  }
}

void Executable::step_ended() {
  std::vector<const void*> hot;
  {
    std::lock_guard<std::mutex> lock(hot_mutex_);
    if (hot_.empty()) return;
    hot.swap(hot_);
  }
  huge_pages::collapse_around(hot);
}

const ExecPlan* Executable::part_on(const std::string& device) const {
  for (auto& p : plan_->parts)
    if (p->device == device) return p.get();
  return nullptr;
}

Executable::~Executable() {
  // Stop every actor and wait until all are down; only then drop the handles in the plans.
  // Dropping them earlier would race with handlers still reading a plan, and letting an
  // exiting actor release the last reference to its plan would free the actor inside its
  // own exit.
  // A fast node first stops taking from its mailbox in its turn, after which no thread touches
  // its state any more and its actor may exit: the turn that stops it sends its exit (from the
  // workers, beside one another); another node's exit goes from here. Each node's actor counts
  // `cleaned_up` down once its cleanup has run (NodeActor::count_down_at_cleanup), not through
  // a monitor per node: a message back per node to this thread would double the teardown.
  std::vector<std::pair<NodeActor*, const caf::actor*>> nodes;
  for (auto& p : plan_->parts)
    for (auto& a : p->actors)  // inactive nodes have none
      if (a) nodes.push_back({static_cast<NodeActor*>(caf::actor_cast<caf::abstract_actor*>(a)), &a});
  std::latch cleaned_up(static_cast<std::ptrdiff_t>(nodes.size()));
  for (auto [node, actor] : nodes) node->count_down_at_cleanup(cleaned_up);
  for (auto [node, actor] : nodes) {
    if (node->fast())
      node->stop_fast_path([actor = *actor] { caf::anon_send_exit(actor, caf::exit_reason::user_shutdown); });
    else
      caf::anon_send_exit(*actor, caf::exit_reason::user_shutdown);
  }
  if (step_actor_) {
    caf::scoped_actor self{*system_};
    self->monitor(step_actor_);
    caf::anon_send_exit(step_actor_, caf::exit_reason::user_shutdown);
    self->receive([](caf::down_msg&) {});
  }
  cleaned_up.wait();
  for (auto& p : plan_->parts) {
    for (auto& node : p->nodes) {
      node.outputs.clear();
      node.control_outputs.clear();
      node.replica_nodes.clear();
    }
    for (auto& [id, state] : p->states) {
      state.queue = nullptr;
      state.shard = nullptr;
    }
    for (auto& [id, loop] : p->loops) loop.loop_end.clear();  // its Targets hold the Exits' actors, which hold the plan
    p->actors.clear();
    p->fast.clear();
    p->step_actor = nullptr;
  }
  step_actor_ = nullptr;
}

namespace {

// A node no input of which has come yet is not among the waits, yet another device may wait for
// its value: for every value a _Send sends out of a partition whose producer is not waiting,
// the waiting nodes it depends on (walking back through its inputs) become its sources, so a
// chain of waits can be followed through it.
void add_unstarted_producers(const std::vector<const Executable*>& exes, uint64_t step, std::vector<WaitReport>& out) {
  std::set<std::string> waiting;
  for (auto& r : out) waiting.insert(r.node);
  for (auto& exe : exes)
    for (auto& part : exe->parts()) {
      const Graph& g = *part->graph;
      for (int id = 0; id < g.size(); ++id) {
        if (part->nodes[std::size_t(id)].kind != NodeKind::send || g.node(id).inputs.empty()) continue;
        const int start = g.node(id).inputs[0].node;
        if (waiting.count(g.node(start).name)) continue;
        std::vector<WaitSource> sources;
        std::set<int> seen{start};
        std::vector<int> todo{start};
        auto visit = [&](int in) {
          if (!seen.insert(in).second) return;
          if (waiting.count(g.node(in).name)) sources.push_back({"", g.node(in).name, g.node(in).name});
          else todo.push_back(in);
        };
        while (!todo.empty()) {
          const Node& n = g.node(todo.back());
          todo.pop_back();
          for (auto& in : n.inputs) visit(in.node);
          for (int c : n.control_inputs) visit(c);
        }
        if (sources.empty()) continue;
        const Node& producer = g.node(start);
        WaitReport r{producer.name, Tag{step, 0, 0}, 0, int(producer.inputs.size()), {"inputs not come yet"},
                     std::move(sources)};
        r.inferred = true;
        waiting.insert(producer.name);
        out.push_back(std::move(r));
      }
    }
}

}  // namespace

std::vector<WaitReport> ask_waits(caf::actor_system& system, const std::vector<const Executable*>& exes,
                                  caf::duration bound, std::optional<uint64_t> step) {
  std::vector<WaitReport> out;
  caf::scoped_actor self{system};
  using Handle = decltype(self->request(caf::actor{}, bound, waits_atom::value));
  std::vector<Handle> asked;
  for (auto& exe : exes)
    for (auto& part : exe->parts())
      for (auto& a : part->actors)
        if (a) asked.push_back(step ? self->request(a, bound, waits_atom::value, *step)
                                    : self->request(a, bound, waits_atom::value));
  for (auto& h : asked)
    h.receive(
        [&](std::vector<WaitReport>& reports) {
          for (auto& r : reports) out.push_back(std::move(r));
        },
        [&](caf::error&) {});
  if (step) add_unstarted_producers(exes, *step, out);
  return out;
}

}  // namespace troupe
