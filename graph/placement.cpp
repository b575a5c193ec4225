#include "graph/placement.hpp"

#include <cstdlib>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <numeric>
#include <optional>
#include <span>
#include <string_view>

#include "core/report.hpp"
#include "core/device_name.hpp"

namespace troupe {
namespace {

// What an input whose shape is not fully known is taken to cost when it crosses devices.
constexpr int64_t kUnknownInputBytes = 4096;

struct Device {
  std::string name;
  DeviceSpec spec;
};

// The colocation groups: a union-find over node ids that also keeps each link, with the
// reason for it, so that a conflict can say why two nodes must share a device.
class ColocationGroups {
 public:
  explicit ColocationGroups(int n) : parent_(std::size_t(n)) { std::iota(parent_.begin(), parent_.end(), 0); }

  int find(int x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }

  void join(int a, int b, std::string why) {
    if (a == b) return;
    links_.push_back({a, b, std::move(why)});
    parent_[find(a)] = find(b);
  }

  // The reasons along a shortest chain of links from a to b (which share a group).
  std::string why(int a, int b) const {
    std::vector<std::vector<std::pair<int, const std::string*>>> next(parent_.size());
    for (auto& link : links_) {
      next[link.a].push_back({link.b, &link.why});
      next[link.b].push_back({link.a, &link.why});
    }
    std::vector<int> came_from(parent_.size(), -1);
    std::vector<const std::string*> reason(parent_.size(), nullptr);
    std::deque<int> frontier{a};
    came_from[a] = a;
    while (!frontier.empty() && came_from[b] < 0) {
      int x = frontier.front();
      frontier.pop_front();
      for (auto [other, because] : next[x])
        if (came_from[other] < 0) {
          came_from[other] = x;
          reason[other] = because;
          frontier.push_back(other);
        }
    }
    std::string text;
    for (int x = b; x != a && came_from[x] >= 0; x = came_from[x])
      text = *reason[x] + (text.empty() ? "" : ", and " + text);
    return text;
  }

 private:
  struct Link {
    int a, b;
    std::string why;
  };
  std::vector<int> parent_;
  std::vector<Link> links_;  // few: most nodes are colocated with none
};

bool feeds_a_merge(const Graph& graph, const Graph::Edges& edges, const Node& node) {
  if (node.op != "NextIteration") return false;
  for (auto& c : edges.data[node.id][0])
    if (graph.node(c.node).op_def->fires_on_first_live_input) return true;
  return false;
}

ColocationGroups colocation_groups(const Graph& graph, const Graph::Edges& edges) {
  ColocationGroups groups(graph.size());
  std::map<std::string, int> variable_users, stack_users;
  for (int id = 0; id < graph.size(); ++id) {
    const Node& node = graph.node(id);
    // A "_class" naming a node that is not in the graph (pruned away) is ignored, as TensorFlow does.
    for (auto& entry : get_attr_or<std::vector<std::string>>(node.attrs, "_class", {}))
      if (entry.rfind("loc:@", 0) == 0)
        if (const Node* target = graph.find(entry.substr(5)))
          groups.join(id, target->id, node.describe() + " is colocated with " + target->describe());
    if (node.op_def->variable_op) {
      const std::string& variable = variable_name(node);
      auto [first, fresh] = variable_users.try_emplace(variable, id);
      if (!fresh)
        groups.join(id, first->second,
                    fmt::format("{} and {} both use variable '{}'", node.describe(),
                                graph.node(first->second).describe(), variable));
    }
    if (node.op == "StackPush" || node.op == "StackPop") {
      auto stack = get_attr_or<std::string>(node.attrs, "stack_name", "");
      auto [first, fresh] = stack_users.try_emplace(stack, id);
      if (!fresh)
        groups.join(id, first->second,
                    fmt::format("{} and {} both use stack '{}'", node.describe(),
                                graph.node(first->second).describe(), stack));
    }
    if (node.op == "NextIteration")
      for (auto& c : edges.data[id][0])
        if (graph.node(c.node).op_def->fires_on_first_live_input)
          groups.join(id, c.node, node.describe() + " is the back edge into " + graph.node(c.node).describe());
  }
  return groups;
}

// One colocation group: its members (ascending ids), their merged request, and the nodes whose
// requests set each part of it. Or, `alone`, the nodes colocated with no other that have one
// request and op (most nodes of a graph are alone and request nothing): they have the same
// candidates, found once for the first of them (`members`), but each its own device.
struct Group {
  bool alone = false;
  std::vector<int> members;
  DeviceSpec request;
  int job_by = -1, task_by = -1, type_by = -1, index_by = -1;
  int requester() const {
    for (int by : {job_by, task_by, type_by, index_by})
      if (by >= 0) return by;
    return -1;
  }
  std::vector<int> candidates;  // indices into the devices
};

DeviceSpec parse_request(const Node& node) {
  try {
    return DeviceSpec::parse(node.requested_device);
  } catch (const Error& e) {
    fail(ErrorCode::invalid_argument, "{} requests device '{}', which is not a device name: {}",
         node.describe(), node.requested_device, e.what());
  }
}

// Merges the requests of the group's members (a NextIteration feeding a Merge yields to it).
// In a single process the jobs and tasks requested do not matter, nor do their disagreements.
void merge_requests(const Graph& graph, const Graph::Edges& edges, const ColocationGroups& groups,
                    Group& group, bool single_process) {
  for (int id : group.members) {
    const Node& node = graph.node(id);
    if (node.requested_device.empty() || feeds_a_merge(graph, edges, node)) continue;
    DeviceSpec request = parse_request(node);
    if (single_process) request.job.reset(), request.task.reset();
    auto merge = [&](auto& merged, const auto& wanted, int& by) {
      if (!wanted) return;
      if (merged && *merged != *wanted) {
        const Node& other = graph.node(by);
        fail(ErrorCode::invalid_argument,
             "{} requests '{}' but must share a device with {}, which requests '{}' ({})",
             node.describe(), node.requested_device, other.describe(), other.requested_device,
             groups.why(id, by));
      }
      if (!merged) {
        merged = wanted;
        by = id;
      }
    };
    merge(group.request.job, request.job, group.job_by);
    merge(group.request.task, request.task, group.task_by);
    merge(group.request.type, request.type, group.type_by);
    merge(group.request.index, request.index, group.index_by);
  }
}

std::string device_list(const std::vector<Device>& devices) {
  std::string list;
  for (auto& d : devices) list += (list.empty() ? "" : ", ") + d.name;
  return list;
}

class Placer {
 public:
  Placer(const Graph& graph, const PlacementOptions& options) : graph_(graph), options_(options) {
    TROUPE_CHECK_ARG(!options.devices.empty(), "placement needs at least one device");
    for (auto& name : options.devices) {
      DeviceSpec spec = DeviceSpec::parse(name);
      TROUPE_CHECK_ARG(spec.job && spec.task && spec.type && spec.index,
                       "placement: device '{}' is not a full name (/job:J/task:T/device:TYPE:I)", name);
      devices_.push_back({name, spec});
    }
  }

  std::vector<int> place() {
    // The consumers of nodes are read only for a loop's NextIteration.
    bool loops = false;
    for (int id = 0; id < graph_.size() && !loops; ++id) loops = graph_.node(id).op == "NextIteration";
    const auto edges = loops ? graph_.out_edges() : Graph::Edges{};
    auto groups = colocation_groups(graph_, edges);
    const std::size_t n = std::size_t(graph_.size());
    std::vector<int> size_of_root(n, 0);
    for (int id = 0; id < int(n); ++id) ++size_of_root[std::size_t(groups.find(id))];
    std::vector<int> group_of(n);
    std::vector<int> index_of_root(n, -1);
    std::map<std::pair<std::string_view, std::string_view>, int> class_of;  // the alone by request and op
    for (int id = 0; id < int(n); ++id) {
      const int root = groups.find(id);
      int* index = &index_of_root[std::size_t(root)];
      if (size_of_root[std::size_t(root)] == 1) {
        const Node& node = graph_.node(id);
        index = &class_of.try_emplace({node.requested_device, node.op}, -1).first->second;
      }
      if (*index < 0) {
        *index = int(groups_.size());
        groups_.emplace_back().alone = size_of_root[std::size_t(root)] == 1;
      }
      group_of[std::size_t(id)] = *index;
      Group& group = groups_[std::size_t(*index)];
      if (!group.alone || group.members.empty()) group.members.push_back(id);
    }
    for (auto& group : groups_) {
      merge_requests(graph_, edges, groups, group, options_.single_process);
      find_candidates(group);
    }
    tell_soft_placed();
    std::vector<int> device_of(n, -1);
    bool open = false;  // a node with several candidates
    for (std::size_t id = 0; id < n; ++id) {
      const auto& candidates = groups_[std::size_t(group_of[id])].candidates;
      if (candidates.size() == 1) device_of[id] = candidates[0];
      else open = true;
    }
    int turn = 0;
    for (int id : open ? graph_.topological_order() : std::vector<int>{}) {
      if (device_of[std::size_t(id)] >= 0) continue;
      const int g = group_of[std::size_t(id)];
      const Group& group = groups_[std::size_t(g)];
      const std::span<const int> members = group.alone ? std::span<const int>(&id, 1) : std::span<const int>(group.members);
      const auto& candidates = group.candidates;
      int best = -1;
      if (options_.policy == PlacementOptions::Policy::alternate) {
        best = candidates[std::size_t(turn++) % candidates.size()];
      } else {
        // The candidate whose inputs from placed producers elsewhere weigh least; among equals,
        // one of the default job, task and type, then the first.
        std::pair<int64_t, bool> best_cost;
        for (int d : candidates) {
          int64_t bytes = 0;
          for (int m : members)
            for (auto& in : graph_.node(m).inputs) {
              const int placed = device_of[std::size_t(in.node)];
              if ((group.alone || group_of[std::size_t(in.node)] != g) && placed >= 0 && placed != d)
                bytes += input_bytes(in);
            }
          std::pair<int64_t, bool> cost{bytes, !is_default(devices_[d].spec)};
          if (best < 0 || cost < best_cost) {
            best = d;
            best_cost = cost;
          }
        }
      }
      for (int m : members) device_of[std::size_t(m)] = best;
    }
    return device_of;
  }

 private:
  bool has_kernel(const Node& node, const std::string& type) const {
    return !options_.has_kernel || options_.has_kernel(node, type);
  }

  bool is_default(const DeviceSpec& d) const {
    return *d.job == options_.default_job && *d.task == options_.default_task && *d.type == options_.default_type;
  }

  int64_t input_bytes(Endpoint in) const {
    const Node& producer = graph_.node(in.node);
    const auto& shape = producer.output_shapes[in.port];
    const auto size = int64_t(size_of(producer.output_types[in.port]));
    return shape.fully_defined() && size > 0 ? shape.num_elements() * size : kUnknownInputBytes;
  }

  // The devices matching the group's request on which every member has a kernel; else, with
  // soft placement, the CPUs of the requested job and task.
  void find_candidates(Group& group) {
    DeviceSpec request = group.request;
    if (options_.single_process) request.job.reset(), request.task.reset();
    if (!request.job && !request.task) request.task = options_.default_task;
    if (!request.job) request.job = options_.default_job;
    std::map<std::string, bool> runs_on;  // device type -> every member has a kernel there
    auto all_run_on = [&](const std::string& type) {
      auto [it, fresh] = runs_on.try_emplace(type, true);
      if (fresh)
        for (int m : group.members) it->second = it->second && has_kernel(graph_.node(m), type);
      return it->second;
    };
    std::vector<int> matching;
    for (int d = 0; d < int(devices_.size()); ++d)
      if (request.matches(devices_[d].spec)) {
        matching.push_back(d);
        if (all_run_on(*devices_[d].spec.type)) group.candidates.push_back(d);
      }
    if (!group.candidates.empty() || !options_.allow_soft_placement) {
      if (group.candidates.empty()) no_device_error(group, request, matching);
      return;
    }
    DeviceSpec cpu{.job = request.job, .task = request.task, .type = "CPU"};
    for (int d = 0; d < int(devices_.size()); ++d)
      if (cpu.matches(devices_[d].spec) && all_run_on("CPU")) group.candidates.push_back(d);
    if (group.candidates.empty()) no_device_error(group, request, matching);
    if (request.type && *request.type != "CPU") {
      const int by = group.requester();
      const Node& requester = graph_.node(by >= 0 ? by : group.members[0]);
      soft_placed_.emplace(requester.op, fmt::format("{} asked for '{}'{}", requester.describe(),
                                                     requester.requested_device,
                                                     matching.empty() ? ", which this cluster does not have" : ""));
    }
  }

  // Nodes that asked for a device of another type and run on a CPU (soft placement) are told,
  // once per op type in the process, on standard error: the program meant them elsewhere (and
  // today no op has a GPU kernel, so every GPU request ends here).
  void tell_soft_placed() const {
    if (soft_placed_.empty()) return;
    static std::mutex mutex;
    static std::set<std::string> told;  // op types, guarded by mutex
    std::vector<std::string> fresh;
    {
      std::lock_guard<std::mutex> lock(mutex);
      for (auto& [op, what] : soft_placed_)
        if (told.insert(op).second) fresh.push_back(what);
    }
    if (fresh.empty()) return;
    report_to_stderr(fmt::format(
        "soft placement runs {} op type(s) on a CPU instead of the device they asked for, which has no kernel for "
        "them or is not here: {}{}",
        fresh.size(), fmt::join(fresh.begin(), fresh.begin() + std::ptrdiff_t(std::min<std::size_t>(fresh.size(), 3)), "; "),
        fresh.size() > 3 ? fmt::format("; and {} more", fresh.size() - 3) : std::string()));
  }

  [[noreturn]] void no_device_error(const Group& group, const DeviceSpec& request,
                                    const std::vector<int>& matching) const {
    const int by = group.requester();
    const Node& requester = graph_.node(by >= 0 ? by : group.members[0]);
    if (matching.empty() && by < 0)
      fail(ErrorCode::invalid_argument,
           "{} requests no device, and the default job and task ('{}') have none; the devices are: {}",
           requester.describe(), request.to_string(), device_list(devices_));
    if (matching.empty())
      fail(ErrorCode::invalid_argument, "{} requests device '{}', which none of the devices matches: {}",
           requester.describe(), requester.requested_device, device_list(devices_));
    const Device& device = devices_[matching[0]];
    const std::string asked = by >= 0 ? requester.requested_device : request.to_string();
    const char* soft = options_.allow_soft_placement
                           ? "; soft placement found no CPU of that job and task with one either"
                           : "; soft placement is off";
    for (int m : group.members) {
      const Node& node = graph_.node(m);
      if (has_kernel(node, *device.spec.type)) continue;
      if (m == requester.id)
        fail(ErrorCode::invalid_argument, "{} requests device '{}' ({}), but op {} has no {} kernel{}",
             node.describe(), asked, device.name, node.op, *device.spec.type, soft);
      fail(ErrorCode::invalid_argument,
           "{} must share a device with {}, which requests '{}' ({}), but op {} has no {} kernel{}",
           node.describe(), requester.describe(), asked, device.name, node.op,
           *device.spec.type, soft);
    }
    fail(ErrorCode::internal, "placement of {}: no candidate device, yet every member has a kernel",
         requester.describe());
  }

  const Graph& graph_;
  const PlacementOptions& options_;
  std::vector<Device> devices_;
  std::vector<Group> groups_;
  std::map<std::string, std::string> soft_placed_;  // op type -> a node of it that asked elsewhere
};

}  // namespace

std::vector<int> place_indices(const Graph& graph, const PlacementOptions& options) {
  return Placer(graph, options).place();
}

std::vector<std::string> place(const Graph& graph, const PlacementOptions& options) {
  const std::vector<int> index = place_indices(graph, options);
  std::vector<std::string> placed(index.size());
  for (std::size_t id = 0; id < index.size(); ++id) placed[id] = options.devices[std::size_t(index[id])];
  return placed;
}

PlacementOptions::Policy placement_policy_from_environment() {
  const char* value = std::getenv("TROUPE_PLACEMENT");
  const std::string policy = value ? value : "";
  if (policy.empty() || policy == "cost") return PlacementOptions::Policy::cost;
  if (policy == "alternate") return PlacementOptions::Policy::alternate;
  fail(ErrorCode::invalid_argument, "TROUPE_PLACEMENT is '{}': expected 'cost' or 'alternate'", policy);
}

}  // namespace troupe
