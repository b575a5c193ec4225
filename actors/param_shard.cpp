#include "actors/param_shard.hpp"

#include <algorithm>

#include "devices/cpu_threads.hpp"
#include "ops/state/variable.hpp"

namespace troupe {
namespace {
constexpr std::size_t kTeamUpdateBytes = std::size_t(8) << 20;

// The slots an optimizer's first update on `value` starts from: zeros (adagrad's accumulator:
// initial_accumulator).
std::vector<Tensor> initial_slots(const OptimizerSpec& spec, const Tensor& value) {
  std::vector<Tensor> slots;
  for (int k = 0; k < spec.num_slots(); ++k) {
    Tensor t = Tensor::zeros(value.dtype(), value.shape());
    if (spec.kind == OptimizerKind::adagrad)
      visit_dtype(t.dtype(), [&](auto zero) {
        using T = decltype(zero);
        if constexpr (std::is_floating_point_v<T>)
          std::fill_n(t.data<T>(), t.num_elements(), T(spec.initial_accumulator));
      });
    slots.push_back(std::move(t));
  }
  return slots;
}

// The slots as an update on `value` finds them: created on first use, and started afresh
// when the variable was re-assigned with another shape.
void fit_slots(ParamShardState::Slots& slots, const OptimizerSpec& spec, const Tensor& value) {
  if (slots.tensors.empty() && spec.num_slots() > 0) slots.tensors = initial_slots(spec, value);
  for (auto& s : slots.tensors)
    if (s.shape() != value.shape()) s = Tensor::zeros(value.dtype(), value.shape());
}

std::string slots_key(const std::string& variable, const OptimizerSpec& spec) {
  return variable + "/" + spec.name();
}
}  // namespace

caf::behavior param_shard(caf::stateful_actor<ParamShardState>* self) {
  return {
      [self](read_atom, const std::string& name) -> ShardReply {
        auto it = self->state.variables.find(name);
        if (it == self->state.variables.end())
          return {{}, ErrorCode::failed_precondition,
                  "variable '" + name + "' is not initialised (run its initializer first)"};
        return {it->second, ErrorCode::ok, {}};
      },
      [self](update_atom, const std::string& name, int32_t kind, Tensor& value,
             bool validate_shape) -> ShardReply {
        auto& vars = self->state.variables;
        auto update = VariableUpdate(kind);
        auto it = vars.find(name);
        if (update == VariableUpdate::assign) {
          if (it != vars.end() && validate_shape && it->second.shape() != value.shape())
            return {{}, ErrorCode::invalid_argument,
                    "cannot assign " + value.describe() + " to variable '" + name + "' of " +
                        it->second.describe()};
          // Own the bytes: the value may be a feed or another node's output that others hold.
          Tensor owned = value.buffer_use_count() == 1 ? std::move(value) : value.copy();
          vars[name] = owned;
          return {owned, ErrorCode::ok, {}};
        }
        if (it == vars.end())
          return {{}, ErrorCode::failed_precondition,
                  "variable '" + name + "' is not initialised (run its initializer first)"};
        Tensor& current = it->second;
        if (current.buffer_use_count() > 1) current = current.copy();
        try {
          apply_variable_update(current, value, update);
        } catch (const Error& e) {
          return {{}, e.code(), "variable '" + name + "': " + e.what()};
        }
        return {current, ErrorCode::ok, {}};
      },
      [self](apply_atom, const std::string& name, const OptimizerSpec& spec, const Tensor& grad,
             double learning_rate) -> ShardReply {
        auto it = self->state.variables.find(name);
        if (it == self->state.variables.end())
          return {{}, ErrorCode::failed_precondition,
                  "variable '" + name + "' is not initialised (run its initializer first)"};
        Tensor& value = it->second;
        if (value.buffer_use_count() > 1) value = value.copy();  // a reader holds the old value
        auto& slots = self->state.slots[slots_key(name, spec)];
        fit_slots(slots, spec, value);
        for (auto& s : slots.tensors)
          if (s.buffer_use_count() > 1) s = s.copy();  // a snapshot being written holds it
        try {
          // An update is work on the CPU's cores like any kernel's: a large one (a dense
          // layer's weights) runs as a team, in parallel over slices of the variable.
          const int64_t step = ++slots.step;
          if (grad.byte_size() >= kTeamUpdateBytes) {
            run_as_team([&] { apply_optimizer_in_parallel(spec, value, slots.tensors, grad, learning_rate, step); });
          } else {
            auto lease = lease_one_core_for(grad.byte_size());
            apply_optimizer(spec, value, slots.tensors, grad, learning_rate, step);
          }
        } catch (const Error& e) {
          return {{}, e.code(), "variable '" + name + "': " + e.what()};
        }
        return {};
      },
      [self](snapshot_atom, const std::vector<OptimizerState>& wanted) {
        ShardContents out;
        for (auto& [name, value] : self->state.variables) out.variables.emplace_back(name, value);
        for (auto& w : wanted) {
          auto var = self->state.variables.find(w.variable);
          if (var == self->state.variables.end()) continue;
          OptimizerState state{w.variable, w.spec, {}, 0};
          auto it = self->state.slots.find(slots_key(w.variable, w.spec));
          if (it != self->state.slots.end()) {
            state.step = it->second.step;
            state.slots = it->second.tensors;
          }
          bool fits = int(state.slots.size()) == w.spec.num_slots();
          for (auto& t : state.slots) fits = fits && t.shape() == var->second.shape();
          if (!fits) state.slots = initial_slots(w.spec, var->second);
          out.optimizers.push_back(std::move(state));
        }
        return out;
      },
      [self](restore_atom, ShardContents& contents) -> ShardReply {
        for (auto& [name, value] : contents.variables) self->state.variables[name] = std::move(value);
        for (auto& o : contents.optimizers)
          self->state.slots[slots_key(o.variable, o.spec)] = {std::move(o.slots), o.step};
        return {};
      },
      [self](names_atom) {
        std::vector<std::string> names;
        for (auto& [name, value] : self->state.variables) names.push_back(name);
        std::sort(names.begin(), names.end());
        return names;
      },
  };
}

ParamShards::ParamShards(caf::actor_system& system, std::shared_ptr<const Graph> graph, int count)
    : graph_(std::move(graph)) {
  TROUPE_CHECK_ARG(count >= 1, "a session needs at least one parameter shard, got num_param_shards = {}", count);
  for (int i = 0; i < count; ++i) shards_.push_back(system.spawn(param_shard));
}

ParamShards::~ParamShards() {
  for (auto& s : shards_) caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
}

int ParamShards::index_of(const std::string& variable) const {
  std::lock_guard<std::mutex> lock(mutex_);
  const int n = graph_->size();
  for (; scanned_nodes_ < n; ++scanned_nodes_) {
    const Node& node = graph_->node(scanned_nodes_);
    if (node.op == "VariableV2" && index_.emplace(variable_name(node), next_).second) next_ = (next_ + 1) % size();
  }
  auto [it, added] = index_.emplace(variable, next_);
  if (added) next_ = (next_ + 1) % size();
  return it->second;
}

}  // namespace troupe
