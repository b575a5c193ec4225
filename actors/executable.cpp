#include "actors/executable.hpp"

#include "actors/executor/spawn_node.hpp"
#include "actors/runtime.hpp"
#include "actors/step_actor.hpp"
#include "core/fingerprint.hpp"
#include "ops/state/variable.hpp"

namespace troupe {
namespace {

// Placement: the requested device if this process has it and a kernel for the op exists
// there; otherwise (soft placement) the CPU. Variable ops live with the shard, on the CPU.
const Device& place(const Node& node, const ExecutableOptions& options) {
  const auto& registry = DeviceRegistry::instance();
  auto spec = DeviceSpec::parse(node.requested_device);
  if (spec.job && *spec.job != "localhost")
    fail(ErrorCode::invalid_argument, "{} requests device '{}': this process runs only job 'localhost'",
         node.describe(), node.requested_device);
  if (node.op_def->variable_op || node.op_def->queue_op || spec.empty()) return registry.cpu();
  for (const Device* d : registry.matching(spec))
    if (KernelRegistry::global().has(node.op, d->type())) return *d;
  if (options.allow_soft_placement) return registry.cpu();
  auto matching = registry.matching(spec);
  if (matching.empty())
    fail(ErrorCode::invalid_argument, "{} requests device '{}', which this process does not have ({})",
         node.describe(), node.requested_device, registry.gpu_status());
  fail(ErrorCode::invalid_argument, "{} requests device '{}', which has no kernel for the op",
       node.describe(), node.requested_device);
}

// Places every node, then puts a _Send on the producer's device and a _Recv on the consumer's
// on each data edge between two devices, one pair per tensor and destination device, in the
// producer's frame. A loop's NextIteration is put with its Merge, so the back edge stays on one
// device. Returns each node's device, the new ones included.
std::vector<const Device*> place_and_insert_transfers(Graph& g, const ExecutableOptions& options) {
  const int n = g.size();
  std::vector<const Device*> at(static_cast<std::size_t>(n));
  for (int id = 0; id < n; ++id) at[id] = &place(g.node(id), options);
  for (int id = 0; id < n; ++id)
    if (g.node(id).op_def->fires_on_first_live_input)
      for (auto& in : g.node(id).inputs)
        if (g.node(in.node).op == "NextIteration" && at[in.node] != at[id]) {
          at[in.node] = at[id];
          g.node(in.node).requested_device = at[id]->name();
        }
  std::map<std::pair<Endpoint, const Device*>, Endpoint> received;
  auto fresh_name = [&](std::string base) {
    std::string name = base;
    for (int k = 1; g.has_name(name); ++k) name = base + "_" + std::to_string(k);
    return name;
  };
  for (int id = 0; id < n; ++id) {
    Node& c = g.node(id);
    for (auto& in : c.inputs) {
      const Node& p = g.node(in.node);
      if (at[in.node] == at[id] || is_constant_value(p)) continue;
      auto [it, fresh] = received.try_emplace({in, at[id]});
      if (fresh) {
        AttrMap frame;
        if (!loop_frame(p).empty()) frame[kLoopFrameAttr] = loop_frame(p);
        const std::string to = fmt::format("{}{}", name_of(at[id]->type()), at[id]->index());
        AttrMap send_attrs = frame, recv_attrs = frame;
        send_attrs["to_device"] = at[id]->name();
        recv_attrs["from_device"] = at[in.node]->name();
        const Node& send = g.add_node(NodeSpec{.name = fresh_name(fmt::format("{}/_send{}_to_{}", p.name, in.port, to)),
                                               .op = "_Send",
                                               .inputs = {in},
                                               .attrs = send_attrs,
                                               .requested_device = at[in.node]->name()});
        const Node& recv = g.add_node(NodeSpec{.name = fresh_name(fmt::format("{}/_recv{}_on_{}", p.name, in.port, to)),
                                               .op = "_Recv",
                                               .inputs = {{send.id, 0}},
                                               .attrs = recv_attrs,
                                               .requested_device = at[id]->name()});
        at.push_back(at[in.node]);
        at.push_back(at[id]);
        it->second = {recv.id, 0};
      }
      in = it->second;
    }
  }
  return at;
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

Executable::Executable(caf::actor_system& system, const Graph& graph,
                       const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                       const std::vector<int>& targets, const ShardOf& shard_of,
                       const ExecutableOptions& options)
    : system_(&system) {
  Subgraph sub = eliminate_common_subexpressions(extract_subgraph(graph, feeds, fetches, targets));
  const std::vector<const Device*> placed = place_and_insert_transfers(*sub.graph, options);
  plan_ = std::make_shared<ExecPlan>();
  ExecPlan& p = *plan_;
  p.graph = sub.graph;
  p.args = sub.args;
  p.num_fetches = int(sub.fetches.size());
  p.num_targets = int(sub.targets.size());
  const Graph& g = *p.graph;
  p.nodes.resize(std::size_t(g.size()));
  auto frame_of = [&](int id) -> const std::string& { return loop_frame(g.node(id)); };
  for (auto& f : sub.fetches)
    if (!frame_of(f.node).empty())
      fail(ErrorCode::invalid_argument,
           "fetch '{}' is inside while loop '{}', where it has one value per iteration: fetch the loop's results",
           tensor_name(g.node(f.node), f.port), frame_of(f.node));
  for (int t : sub.targets)
    if (!frame_of(t).empty())
      fail(ErrorCode::invalid_argument, "target '{}' is inside while loop '{}': run the loop's results instead",
           g.node(t).name, frame_of(t));

  // Values cross a loop's boundary only through Enter (in) and Exit (out): any other edge
  // between frames would deliver its messages under the wrong tags and hang the step.
  auto where = [&](const std::string& f) { return f.empty() ? std::string("outside any loop") : "in while loop '" + f + "'"; };
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (n.op == "Exit") continue;
    const std::string frame = frame_of(id);
    const bool enter = n.op == "Enter";
    for (std::size_t slot = 0; slot < n.inputs.size(); ++slot) {
      const Node& p = g.node(n.inputs[slot].node);
      if ((enter && slot == 0) || is_constant_value(p)) continue;
      if (frame_of(p.id) != frame)
        fail(ErrorCode::invalid_argument,
             "{} {} reads {} {}: values cross a loop's boundary only through Enter and Exit (build loops with while_loop)",
             n.describe(), where(frame), tensor_name(p, n.inputs[slot].port), where(frame_of(p.id)));
    }
    for (int c : n.control_inputs)
      if (!(enter && !get_attr_or<bool>(n.attrs, "is_constant", false)) && frame_of(c) != frame)
        fail(ErrorCode::invalid_argument,
             "{} {} has a control input from {} {}: control edges do not cross a loop's boundary",
             n.describe(), where(frame), g.node(c).describe(), where(frame_of(c)));
  }

  std::map<std::string, int> exits_of;  // per loop: its Exits in this executable
  std::map<std::string, int> enters_of;  // and its Enters that are not loop invariants
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (n.op == "Exit") ++exits_of[frame_of(n.inputs[0].node)];
    if (kind_of(g, n) == NodeKind::enter) ++enters_of[get_attr<std::string>(n.attrs, "frame_name", n.name)];
  }

  // Constant inputs are handed to their consumers once, here, instead of travelling as a
  // message every step: a Const without control inputs has the same value in every step and
  // frame. A Const left with nothing to feed (no fetch, no control consumer) gets no actor.
  auto hoistable = [&](int id) { return is_constant_value(g.node(id)); };
  std::vector<bool> active(std::size_t(g.size()), true);
  {
    std::vector<bool> still_needed(std::size_t(g.size()), false);
    for (int id = 0; id < g.size(); ++id) {
      for (int c : g.node(id).control_inputs) still_needed[c] = true;
      if (g.node(id).op_def->fires_on_first_live_input || g.node(id).op_def->frame_op)  // they see constants as messages
        for (auto& in : g.node(id).inputs) still_needed[in.node] = true;
    }
    for (auto& f : sub.fetches) still_needed[f.node] = true;
    for (int t : sub.targets) still_needed[t] = true;
    for (int id = 0; id < g.size(); ++id)
      if (hoistable(id) && !still_needed[id]) active[id] = false;
  }

  std::vector<std::unique_ptr<OpKernel>> kernels(std::size_t(g.size()));
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    NodePlan& np = p.nodes[id];
    np.node = &n;
    np.device = placed[id];
    np.where = n.describe() + " on " + np.device->name();
    np.active = active[id];
    np.num_inputs = n.op == "_Arg" ? 1 : int(n.inputs.size());
    np.num_controls = int(n.control_inputs.size());
    np.fixed_inputs.resize(std::size_t(np.num_inputs));
    np.num_fixed = 0;
    if (n.op == "_Arg") {
      np.input_names.push_back("feed " + std::to_string(get_attr<int64_t>(n.attrs, "index", n.name)));
    } else {
      for (std::size_t slot = 0; slot < n.inputs.size(); ++slot) {
        auto in = n.inputs[slot];
        np.input_names.push_back(tensor_name(g.node(in.node), in.port));
        if (hoistable(in.node) && !n.op_def->fires_on_first_live_input && !n.op_def->frame_op) {
          np.fixed_inputs[slot] = get_attr<Tensor>(g.node(in.node).attrs, "value", g.node(in.node).name);
          ++np.num_fixed;
        }
      }
      if (np.active && np.num_inputs == np.num_fixed && n.control_inputs.empty()) {
        np.num_controls = 1;  // the start signal
        p.sources.push_back(id);
      }
    }
    np.outputs.resize(std::size_t(n.num_outputs()));
    np.kind = kind_of(g, n);
    if (np.kind == NodeKind::enter) {
      const std::string frame = get_attr<std::string>(n.attrs, "frame_name", n.name);
      np.frame_exits = exits_of[frame];
      np.frame_enters = enters_of[frame];
    }
    if (np.kind == NodeKind::enter || np.kind == NodeKind::loop_invariant)
      np.frame_hash = fingerprint64(get_attr<std::string>(n.attrs, "frame_name", n.name));
    if (np.kind == NodeKind::stack_push || np.kind == NodeKind::stack_pop)
      np.stack_hash = fingerprint64(get_attr<std::string>(n.attrs, "stack_name", n.name));
    np.parallel_iterations = int(get_attr_or<int64_t>(n.attrs, "parallel_iterations", 1));
    if (np.kind == NodeKind::queue) np.queue_op = queue_op_of(n);
    if (np.kind == NodeKind::variable) np.variable_op = variable_op_of(n);
    if (np.kind == NodeKind::queue && np.active) {
      if (!options.runtime) fail(ErrorCode::internal, "{}: no runtime to find its queue in", np.where);
      np.queue = options.runtime->queue(QueueSpec::from(n.attrs, n.name));
    }
    if (n.op_def->variable_op && np.active) np.shard = shard_of(variable_name(n));
    if (np.active && np.kind == NodeKind::kernel) {
      try {
        kernels[id] = KernelRegistry::global().create(n, np.device->type());
      } catch (const Error& e) {
        throw Error(e.code(), np.where + ": " + e.what());
      }
    }
  }

  // Pass-through nodes (Identity, LoopCond) that take one value by message and have no control
  // edges and no fetch cost a hop and a firing per value and change nothing: their consumers
  // are wired to the producer instead, and they get no actor. (A loop's iteration has two.)
  std::vector<bool> forwards(std::size_t(g.size()), false);
  {
    auto edges = g.out_edges();
    std::vector<bool> reported(std::size_t(g.size()), false);
    for (auto& f : sub.fetches) reported[f.node] = true;
    for (int t : sub.targets) reported[t] = true;
    for (int id = 0; id < g.size(); ++id) {
      const Node& n = g.node(id);
      if (active[id] && (n.op == "Identity" || n.op == "LoopCond") && n.inputs.size() == 1 &&
          !p.nodes[id].fixed_inputs[0].is_initialized() && n.control_inputs.empty() && edges.control[id].empty() &&
          !reported[id]) {
        forwards[id] = true;
        active[id] = false;
        p.nodes[id].active = false;
        kernels[id].reset();
      }
    }
  }
  auto producer_of = [&](Endpoint e) {
    while (forwards[e.node]) e = g.node(e.node).inputs[0];
    return e;
  };

  // Actors first, then the wiring that names them; nothing runs before the first step.
  p.step_actor = system.spawn(troupe::step_actor, std::shared_ptr<const ExecPlan>(plan_));
  p.actors.resize(std::size_t(g.size()));
  for (int id = 0; id < g.size(); ++id)
    if (active[id])
      p.actors[id] = spawn_node(system, std::shared_ptr<const ExecPlan>(plan_), id, std::move(kernels[id]));
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (!active[id]) continue;
    for (int slot = 0; slot < int(n.inputs.size()); ++slot)
      if (!p.nodes[id].fixed_inputs[slot].is_initialized()) {
        Endpoint from = producer_of(n.inputs[slot]);
        p.nodes[from.node].outputs[from.port].push_back(
            {p.actors[id], uint32_t(slot), p.nodes[id].kind == NodeKind::exit && slot == 0});
      }
    for (int c : n.control_inputs) p.nodes[c].control_outputs.push_back({p.actors[id], kControlSlot});
  }
  for (int i = 0; i < p.num_fetches; ++i) {
    auto f = sub.fetches[i];
    p.nodes[f.node].outputs[f.port].push_back({p.step_actor, uint32_t(i)});
    p.fetch_names.push_back(tensor_name(g.node(f.node), f.port));
  }
  for (int t : sub.targets) p.nodes[t].control_outputs.push_back({p.step_actor, kControlSlot});
}

Executable::~Executable() {
  // Stop every actor and wait until all are down; only then drop the handles in the plan.
  // Dropping them earlier would race with handlers still reading the plan, and letting an
  // exiting actor release the last reference to the plan would free the actor inside its
  // own exit.
  caf::scoped_actor self{*system_};
  std::size_t n = 0;
  auto stop = [&](const caf::actor& a) {
    if (!a) return;
    self->monitor(a);
    caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
    ++n;
  };
  for (auto& a : plan_->actors) stop(a);  // inactive nodes have none
  stop(plan_->step_actor);
  for (std::size_t i = 0; i < n; ++i) self->receive([](caf::down_msg&) {});
  for (auto& node : plan_->nodes) {
    node.outputs.clear();
    node.control_outputs.clear();
    node.queue = nullptr;
    node.shard = nullptr;
  }
  plan_->actors.clear();
  plan_->step_actor = nullptr;
}

}  // namespace troupe
