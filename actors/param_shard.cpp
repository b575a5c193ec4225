#include "actors/param_shard.hpp"

#include <algorithm>

#include "devices/cpu_threads.hpp"
#include "ops/state/variable.hpp"

namespace troupe {
namespace {
constexpr std::size_t kTeamUpdateBytes = std::size_t(8) << 20;
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
        auto& slots = self->state.slots[name + "/" + spec.name()];
        if (slots.tensors.empty() && spec.num_slots() > 0) {
          for (int k = 0; k < spec.num_slots(); ++k) {
            Tensor t = Tensor::zeros(value.dtype(), value.shape());
            if (spec.kind == OptimizerKind::adagrad)
              visit_dtype(t.dtype(), [&](auto zero) {
                using T = decltype(zero);
                if constexpr (std::is_floating_point_v<T>)
                  std::fill_n(t.data<T>(), t.num_elements(), T(spec.initial_accumulator));
              });
            slots.tensors.push_back(std::move(t));
          }
        }
        for (auto& s : slots.tensors)
          if (s.shape() != value.shape())  // the variable was re-assigned with another shape
            s = Tensor::zeros(value.dtype(), value.shape());
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
      [self](names_atom) {
        std::vector<std::string> names;
        for (auto& [name, value] : self->state.variables) names.push_back(name);
        std::sort(names.begin(), names.end());
        return names;
      },
  };
}

}  // namespace troupe
