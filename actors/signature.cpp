#include "actors/signature.hpp"

#include <algorithm>
#include <map>

#include "core/device_name.hpp"
#include "devices/device.hpp"
#include "ops/kernel.hpp"
#include "ops/state/variable.hpp"

namespace troupe {
namespace {

// The subgraph of the signature, CSE'd, checked for what no executor could run: a fetch or
// target inside a loop, an edge between frames that bypasses Enter and Exit.
Subgraph prune_checked(const Graph& graph, const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
               const std::vector<int>& targets) {
  Subgraph sub = prune_and_merge(graph, feeds, fetches, targets);
  const Graph& g = *sub.graph;
  std::vector<const std::string*> frames(std::size_t(g.size()));  // each node's, looked up once
  for (int id = 0; id < g.size(); ++id) frames[std::size_t(id)] = &loop_frame(g.node(id));
  auto frame_of = [&](int id) -> const std::string& { return *frames[std::size_t(id)]; };
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
    const std::string& frame = frame_of(id);
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
  return sub;
}

// A variable lives in one process: every op on it goes where its VariableV2 asks to be (the
// request completed with the default job and task, and a CPU), whether or not the signature
// holds the VariableV2 itself (an update run alone must not land on the scope's device). A
// request naming no device that exists is left to placement, which says so.
void pin_variables(const Graph& full, Graph& sub, const PlacementOptions& p) {
  std::map<std::string, std::string> home;  // variable -> its VariableV2's full device
  for (int id = 0; id < full.size(); ++id) {
    const Node& n = full.node(id);
    if (n.op != "VariableV2") continue;
    const DeviceSpec d = DeviceSpec::parse(n.requested_device);
    const VariableHome at = variable_home(d, p.default_job, p.default_task);
    const std::string device = full_device_name(at.job, at.task, d.type.value_or(p.default_type), d.index.value_or(0));
    if (std::find(p.devices.begin(), p.devices.end(), device) != p.devices.end()) home[variable_name(n)] = device;
  }
  for (int id = 0; id < sub.size(); ++id) {
    Node& n = sub.node(id);
    if (!n.op_def->variable_op) continue;
    auto it = home.find(variable_name(n));
    if (it != home.end()) n.requested_device = it->second;
  }
}

// Every node's device, and the graph cut by them (one partition, not copied, when every node is
// on one device).
Partitions place_and_partition(const Graph& full, const std::shared_ptr<Graph>& g, const SignaturePlacement& where) {
  PlacementOptions p;
  p.devices = where.devices;
  p.default_job = where.default_job;
  p.default_task = where.default_task;
  p.single_process = where.single_process;
  p.has_kernel = can_run_on;
  p.allow_soft_placement = where.allow_soft_placement;
  p.policy = where.policy ? *where.policy : placement_policy_from_environment();
  if (!where.single_process) pin_variables(full, *g, p);
  std::vector<int> device_of;
  try {
    device_of = place_indices(*g, p);
  } catch (const Error& e) {
    const auto& registry = DeviceRegistry::instance();
    if (!where.single_process || registry.gpu_count() > 0 || std::string(e.what()).find("GPU") == std::string::npos)
      throw;
    throw Error(e.code(), fmt::format("{} (no GPU here: {})", e.what(), registry.gpu_status()));
  }
  if (!device_of.empty() && std::all_of(device_of.begin(), device_of.end(), [&](int d) { return d == device_of[0]; }))
    return whole_partition(g, p.devices[std::size_t(device_of[0])]);
  std::vector<std::string> names(device_of.size());
  for (std::size_t id = 0; id < device_of.size(); ++id) names[id] = p.devices[std::size_t(device_of[id])];
  return partition(g, names);
}

}  // namespace

SignaturePlacement local_placement() {
  SignaturePlacement where;
  for (const auto& d : DeviceRegistry::instance().devices()) where.devices.push_back(d->name());
  return where;
}

PlacedSignature place_signature(const Graph& graph, const std::vector<Endpoint>& feeds,
                                const std::vector<Endpoint>& fetches, const std::vector<int>& targets,
                                const SignaturePlacement& where) {
  PlacedSignature out;
  out.sub = prune_checked(graph, feeds, fetches, targets);
  out.cut = place_and_partition(graph, out.sub.graph, where);
  return out;
}

PartitionSet PlacedSignature::whole() const {
  std::vector<int> all(cut.parts.size());
  for (int i = 0; i < int(all.size()); ++i) all[i] = i;
  return share(all).set;
}

LocalSignature PlacedSignature::share(const std::vector<int>& parts) const {
  LocalSignature out;
  std::map<int, int> local_of;  // partition index in cut -> in out.set
  for (int i : parts) {
    local_of[i] = int(out.set.parts.size());
    out.set.parts.push_back(cut.parts[std::size_t(i)]);
  }
  out.set.signatures.resize(out.set.parts.size());
  for (int i = 0; i < int(sub.fetches.size()); ++i) {
    auto at = cut.of[sub.fetches[i].node];
    auto it = local_of.find(at.part);
    if (it == local_of.end()) continue;
    out.set.signatures[it->second].fetches.push_back({{at.node, sub.fetches[i].port}, int(out.fetch_index.size())});
    out.set.fetch_names.push_back(tensor_name(sub.graph->node(sub.fetches[i].node), sub.fetches[i].port));
    out.fetch_index.push_back(i);
  }
  for (int t : sub.targets) {
    auto it = local_of.find(cut.of[t].part);
    if (it == local_of.end()) continue;
    out.set.signatures[it->second].targets.push_back(cut.of[t].node);
    ++out.set.num_targets;
  }
  for (int i = 0; i < int(sub.args.size()); ++i) {
    auto at = cut.of[sub.args[i]];
    auto it = local_of.find(at.part);
    if (it == local_of.end()) continue;
    out.set.args.push_back({it->second, at.node});
    out.feed_index.push_back(i);
  }
  return out;
}

bool can_run_on(const Node& n, const std::string& type) {
  if (n.op_def->variable_op || n.op_def->queue_op) return type == "CPU";
  if (n.op_def->fires_on_first_live_input || n.op_def->frame_op) return true;
  return KernelRegistry::global().has(n.op, type == "GPU" ? DeviceType::gpu : DeviceType::cpu);
}

VariableHome variable_home(const DeviceSpec& requested, const std::string& default_job, int default_task) {
  if (!requested.job && !requested.task) return {default_job, default_task};
  return {requested.job.value_or(default_job), requested.task.value_or(0)};
}

}  // namespace troupe
