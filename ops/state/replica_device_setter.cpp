#include "ops/state/replica_device_setter.hpp"

#include <map>
#include <memory>
#include <vector>

#include "core/error.hpp"
#include "core/device_name.hpp"
#include "graph/op_def.hpp"

namespace troupe {
namespace {

// `base` with every field `own` names taken from `own`.
std::string merged(const DeviceSpec& base, const std::string& own) {
  DeviceSpec d = base;
  const DeviceSpec o = DeviceSpec::parse(own);
  if (o.job) d.job = o.job;
  if (o.task) d.task = o.task;
  if (o.type) d.type = o.type;
  if (o.index) d.index = o.index;
  return d.to_string();
}

int64_t bytes_of(const NodeSpec& variable) {
  auto shape = variable.attrs.find("shape");
  auto dtype = variable.attrs.find("dtype");
  if (shape == variable.attrs.end() || dtype == variable.attrs.end()) return 0;
  const auto* s = std::get_if<PartialShape>(&shape->second);
  const auto* t = std::get_if<DType>(&dtype->second);
  if (!s || !t || !s->fully_defined()) return 0;  // unknown size: it adds nothing to the load
  return s->num_elements() * int64_t(size_of(*t));
}

// The name a variable op's variable has (graph.hpp's variable_name, before the node exists).
std::string variable_of(const NodeSpec& spec) {
  auto it = spec.attrs.find("shared_name");
  const auto* name = it == spec.attrs.end() ? nullptr : std::get_if<std::string>(&it->second);
  return name && !name->empty() ? *name : spec.name;
}

}  // namespace

DeviceFunction replica_device_setter(int ps_tasks, ReplicaDeviceOptions options) {
  TROUPE_CHECK_ARG(ps_tasks >= 1, "replica_device_setter: ps_tasks must be at least 1, got {}", ps_tasks);
  struct State {
    std::vector<int64_t> load;                 // bytes per ps task
    std::map<std::string, int> task_of;        // variable -> its ps task
  };
  auto state = std::make_shared<State>();
  state->load.assign(std::size_t(ps_tasks), 0);
  const DeviceSpec worker = DeviceSpec::parse(options.worker_device);
  const std::string ps_job = options.ps_job;
  return [state, worker, ps_job](const NodeSpec& spec) -> std::string {
    const OpDef* def = OpRegistry::global().find(spec.op);
    if (!def || !def->variable_op) return merged(worker, spec.requested_device);
    const std::string variable = variable_of(spec);
    auto known = state->task_of.find(variable);
    int task = 0;
    if (known != state->task_of.end()) {
      task = known->second;
    } else {
      for (int k = 1; k < int(state->load.size()); ++k)
        if (state->load[std::size_t(k)] < state->load[std::size_t(task)]) task = k;
      if (spec.op == "VariableV2") {
        state->load[std::size_t(task)] += bytes_of(spec);
        state->task_of[variable] = task;
      }
    }
    return merged(DeviceSpec{.job = ps_job, .task = task}, spec.requested_device);
  };
}

}  // namespace troupe
