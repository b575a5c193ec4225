#include "actors/state/param_shard.hpp"

#include <algorithm>
#include <optional>
#include <stdexcept>
#include <type_traits>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/failpoint.hpp"
#include "core/report.hpp"
#include "devices/cpu_threads.hpp"
#include "ops/state/variable.hpp"

namespace troupe {
namespace {
using ShardSelf = ShardActor::stateful_pointer<ParamShardState>;
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

std::string slots_key(const std::string& variable, const OptimizerSpec& spec) { return variable + "/" + spec.name(); }

// Takes `delta` bytes of the process's variable memory for `what` of variable `name`; the
// error to answer when it does not fit.
std::optional<ShardReply> reserve(ParamShardState& state, int64_t delta, const std::string& name, const char* what) {
  if (!state.memory || state.memory->reserve(delta)) return std::nullopt;
  const auto& m = *state.memory;
  return ShardReply{
      {},
      ErrorCode::resource_exhausted,
      fmt::format("{} of variable '{}' ({} bytes) do not fit in the variable memory of {}: {} of {} bytes "
                  "in use; split the variable over more ps tasks (ops::partitioned_variable) or raise "
                  "the budget (troupe-node --variable-memory-mb)",
                  what, name, delta, m.owner(), m.used(), m.limit())};
}

int64_t bytes_of(const std::vector<Tensor>& tensors) {
  int64_t n = 0;
  for (auto& t : tensors) n += int64_t(t.byte_size());
  return n;
}

ShardReply uninitialised(const std::string& name) {
  return {{}, ErrorCode::failed_precondition, "variable '" + name + "' is not initialised (run its initializer first)"};
}

// The variable and its optimizer's slots, ready for an update in place: copied where a reader
// (or a snapshot being written) still holds the old value. nullptr when it is not initialised.
struct Updatable {
  Tensor* value = nullptr;
  ParamShardState::Slots* slots = nullptr;
};
Updatable updatable(ParamShardState& state, const std::string& name, const OptimizerSpec& spec,
                    std::optional<ShardReply>& error) {
  auto it = state.variables.find(name);
  if (it == state.variables.end()) {
    error = uninitialised(name);
    return {};
  }
  Tensor& value = it->second;
  auto& slots = state.slots[slots_key(name, spec)];
  const int64_t before = bytes_of(slots.tensors);
  fit_slots(slots, spec, value);
  if ((error = reserve(state, bytes_of(slots.tensors) - before, name, "the optimizer slots"))) {
    slots.tensors.clear();
    reserve(state, -before, name, "");
    return {};
  }
  if (value.buffer_use_count() > 1) value = value.copy();  // a reader holds the old value
  for (auto& s : slots.tensors)
    if (s.buffer_use_count() > 1) s = s.copy();  // a snapshot being written holds it
  return {&value, &slots};
}

// -- optimizer application --

// One optimizer step on the rows of the variable a sparse gradient touches, in place.
ShardReply sparse_optimizer_step(ParamShardState& state, const std::string& name, const OptimizerSpec& spec,
                                 const Tensor& values, const Tensor& indices, double learning_rate) {
  std::optional<ShardReply> error;
  auto [value, slots] = updatable(state, name, spec, error);
  if (!value) return *error;
  try {
    auto lease = lease_one_core_for(values.byte_size());
    apply_optimizer_to_rows(spec, *value, slots->tensors, values, indices, learning_rate, ++slots->step);
  } catch (const Error& e) {
    return {{}, e.code(), "variable '" + name + "': " + e.what()};
  }
  return {};
}

// One optimizer step on the variable and its slots, in place.
ShardReply optimizer_step(ParamShardState& state, const std::string& name, const OptimizerSpec& spec,
                          const Tensor& grad, double learning_rate) {
  if (failpoint("param_shard.optimizer_step", name))
    throw std::runtime_error(fmt::format("failpoint param_shard.optimizer_step of variable '{}'", name));
  std::optional<ShardReply> error;
  auto [found, found_slots] = updatable(state, name, spec, error);
  if (!found) return *error;
  Tensor& value = *found;
  auto& slots = *found_slots;
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
}

// -- sync-replica barriers --

// The gradients (votes) `name` completes a step with: its ops' m, or fewer while lowered.
int aggregated(const ParamShardState& state, const std::string& name, int replicas) {
  auto it = state.aggregate.find(name);
  return it == state.aggregate.end() ? replicas : std::min(replicas, it->second);
}

// The average of the accumulated gradients, applied once; the accumulator moves to the next step.
ShardReply apply_accumulated(ParamShardState& state, const std::string& name) {
  auto& acc = state.accumulators[name];
  const int count = acc.count;
  visit_dtype(acc.sum.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      T* g = acc.sum.data<T>();
      const T scale = T(1) / T(count);
      for (int64_t i = 0, n = acc.sum.num_elements(); i < n; ++i) g[i] *= scale;
    }
  });
  Tensor average = std::move(acc.sum);
  const OptimizerSpec spec = acc.spec;
  const double learning_rate = acc.learning_rate;
  acc = {acc.step + 1, 0, {}, {}, 0};
  return optimizer_step(state, name, spec, average, learning_rate);
}

// A replica's gradient for global step local_step: dropped when the accumulator has moved past
// that step, else added; the replicas-th of a step (fewer while lowered) applies their average.
ShardReply accumulate(ParamShardState& state, const std::string& name, const OptimizerSpec& spec, const Tensor& grad,
                      double learning_rate, int64_t local_step, int replicas) {
  if (!state.variables.count(name)) return uninitialised(name);
  if (replicas < 1)
    return {{},
            ErrorCode::invalid_argument,
            fmt::format("variable '{}': replicas to aggregate must be positive, got {}", name, replicas)};
  auto& acc = state.accumulators[name];
  if (local_step < acc.step) return {Tensor::scalar<int64_t>(1), ErrorCode::ok, {}};
  if (local_step > acc.step) acc = {local_step, 0, {}, {}, 0};  // the first gradient of a newer step
  acc.spec = spec;
  acc.learning_rate = learning_rate;
  try {
    if (acc.count == 0) {
      acc.sum = grad.copy();
    } else {
      if (acc.sum.buffer_use_count() > 1) acc.sum = acc.sum.copy();
      apply_variable_update(acc.sum, grad, VariableUpdate::add);
    }
  } catch (const Error& e) {
    return {{}, e.code(), fmt::format("variable '{}': gradient of replica step {}: {}", name, local_step, e.what())};
  }
  if (++acc.count < aggregated(state, name, replicas)) return {Tensor::scalar<int64_t>(0), ErrorCode::ok, {}};
  ShardReply applied = apply_accumulated(state, name);
  if (applied.code != ErrorCode::ok) return applied;
  return {Tensor::scalar<int64_t>(0), ErrorCode::ok, {}};
}

// The last vote of a step: the next begins, for every replica waiting.
Tensor next_global_step(ParamShardState& state, const std::string& name) {
  Tensor& value = state.variables.at(name);
  Tensor next = Tensor::scalar<int64_t>(value.scalar_value<int64_t>() + 1);
  value = next;
  auto& barrier = state.barriers[name];
  for (auto& waiting : barrier.waiting) waiting.promise.deliver(ShardReply{next, ErrorCode::ok, {}});
  barrier.waiting.clear();
  barrier.stopped = false;
  barrier.begin(next.scalar_value<int64_t>());
  return next;
}

// Replica k as its votes named it, else as its peers' names imply (worker:K for replica K when
// the others' are so), else by its index.
std::string replica_name(const ParamShardState::StepBarrier& b, int k) {
  if (auto it = b.tasks.find(k); it != b.tasks.end() && !it->second.empty()) return it->second;
  for (auto& [index, task] : b.tasks) {
    const auto colon = task.rfind(':');
    if (colon != std::string::npos && task.substr(colon + 1) == std::to_string(index))
      return fmt::format("{}:{}", task.substr(0, colon), k);
  }
  return fmt::format("replica {}", k);
}

// Who has voted for the barrier's step and whose vote is missing, for a hung step's report and
// the vote timer's error.
std::string votes_text(const ParamShardState::StepBarrier& b, const std::string& name, int needed) {
  std::vector<std::string> in, missing;
  for (int k : b.voted) in.push_back(k >= 0 ? replica_name(b, k) : "a replica of unknown index");
  for (int k = 0; k < b.total; ++k)
    if (!b.voted.count(k)) missing.push_back(replica_name(b, k));
  return fmt::format("the votes of the synchronous replicas for step {} of '{}': {} of the {} needed are in{}{}",
                     b.step, name, b.voted.size(), needed,
                     in.empty() ? std::string() : fmt::format(" ({})", fmt::join(in, ", ")),
                     missing.empty() ? std::string() : fmt::format(", missing {}", fmt::join(missing, ", ")));
}

// Every replica waiting is told who is in and who is missing now.
void tell_waiting(ShardSelf self, const ParamShardState::StepBarrier& b, const std::string& name, int needed) {
  if (b.waiting.empty()) return;
  const std::string text = votes_text(b, name, needed);
  for (auto& w : b.waiting)
    if (w.node) send_untyped(self, w.node, wait_note_atom::value, w.token, text);
}

// A timer due `after` from now, unless one due no later is on its way already.
void arm_vote_timer(ShardSelf self, ParamShardState::StepBarrier& b, const std::string& name,
                    std::chrono::milliseconds after) {
  if (b.bound.count() <= 0) return;
  after = std::max(after, std::chrono::milliseconds(1));
  const auto due = std::chrono::steady_clock::now() + after;
  if (b.timer_due && *b.timer_due <= due) return;
  b.timer_due = due;
  self->delayed_send(self, after, sync_deadline_atom::value, name);
}

// A replica's vote that it has sent its gradients of global step local_step.
caf::result<ShardReply> sync_step(ShardSelf self, const std::string& name, int64_t local_step, int replicas,
                                  const SyncVote& vote) {
  auto& state = self->state;
  auto it = state.variables.find(name);
  if (it == state.variables.end()) return uninitialised(name);
  if (it->second.dtype() != DType::int64 || it->second.num_elements() != 1)
    return ShardReply{{},
                      ErrorCode::invalid_argument,
                      fmt::format("the global step '{}' must be an int64 scalar, not {}", name, it->second.describe())};
  const int64_t current = it->second.scalar_value<int64_t>();
  if (local_step < current) return ShardReply{it->second, ErrorCode::ok, {}};  // stale: go on at once
  if (local_step > current)
    return ShardReply{
        {},
        ErrorCode::failed_precondition,
        fmt::format("a replica voted for step {} of '{}', which is only at step {}", local_step, name, current)};
  auto& barrier = state.barriers[name];
  if (barrier.stopped) return ShardReply{it->second, ErrorCode::ok, {}};
  if (barrier.step != current) barrier.begin(current);
  if (vote.total_replicas > 0) barrier.total = vote.total_replicas;
  if (vote.replica >= 0 && !vote.task.empty()) barrier.tasks[vote.replica] = vote.task;
  barrier.bound = std::chrono::milliseconds(vote.bound_ms);
  if (barrier.voted.empty()) barrier.first_vote = std::chrono::steady_clock::now();
  // A vote of unknown index counts apart from every other (indexes below -1).
  barrier.voted.insert(vote.replica >= 0 ? vote.replica : -2 - int(barrier.voted.size()));
  const int needed = barrier.needed = aggregated(state, name, replicas);
  if (int(barrier.voted.size()) < needed) {
    // The sender first: making the promise takes it over from the message.
    caf::actor voter = caf::actor_cast<caf::actor>(self->current_sender());
    auto promise = self->make_response_promise<ShardReply>();
    barrier.waiting.push_back({promise, std::move(voter), vote.token});
    tell_waiting(self, barrier, name, needed);
    // Due a bound after the step's first vote.
    arm_vote_timer(self, barrier, name,
                   std::chrono::ceil<std::chrono::milliseconds>(barrier.first_vote + barrier.bound -
                                                                std::chrono::steady_clock::now()));
    return promise;
  }
  return ShardReply{next_global_step(state, name), ErrorCode::ok, {}};
}

// The vote timer of global step `name`: replicas that have waited the bound since the step's
// first vote fail, naming the votes missing; else it waits for the rest of the bound.
void sync_deadline(ShardSelf self, const std::string& name) {
  auto& state = self->state;
  auto b = state.barriers.find(name);
  if (b == state.barriers.end()) return;
  auto& barrier = b->second;
  barrier.timer_due.reset();
  if (barrier.waiting.empty() || barrier.stopped || barrier.bound.count() <= 0) return;
  const auto waited = std::chrono::steady_clock::now() - barrier.first_vote;
  if (waited < barrier.bound) {
    arm_vote_timer(self, barrier, name, std::chrono::ceil<std::chrono::milliseconds>(barrier.bound - waited));
    return;
  }
  const std::string message = fmt::format(
      "{}: the missing votes did not come within {:.1f} s of the first (a replica is lost or stalled; a Supervisor "
      "goes on with the replicas alive, backup replicas do not wait for the slowest; "
      "SyncReplicasOptions::vote_timeout sets this bound)",
      votes_text(barrier, name, barrier.needed), std::chrono::duration<double>(waited).count());
  for (auto& w : barrier.waiting) w.promise.deliver(ShardReply{{}, ErrorCode::deadline_exceeded, message});
  barrier.waiting.clear();
}

// From now on `name` completes a step with `m` gradients or votes (0: as its ops say); a step
// that has them already completes now (a replica was lost while the others waited for it).
ShardReply sync_aggregate(ParamShardState& state, const std::string& name, int m) {
  if (!state.variables.count(name)) return uninitialised(name);
  if (m <= 0) {
    state.aggregate.erase(name);
    return {Tensor::scalar<int64_t>(0), ErrorCode::ok, {}};
  }
  state.aggregate[name] = m;
  auto acc = state.accumulators.find(name);
  if (acc != state.accumulators.end() && acc->second.count >= m) {
    ShardReply applied = apply_accumulated(state, name);
    if (applied.code != ErrorCode::ok) return applied;
  }
  auto barrier = state.barriers.find(name);
  if (barrier != state.barriers.end()) barrier->second.needed = std::min(barrier->second.needed, m);
  if (barrier != state.barriers.end() && !barrier->second.stopped && int(barrier->second.voted.size()) >= m &&
      barrier->second.step == state.variables.at(name).scalar_value<int64_t>())
    next_global_step(state, name);
  return {Tensor::scalar<int64_t>(m), ErrorCode::ok, {}};
}

// Training has ended: the replicas waiting for a step that will not come go on (and stop).
ShardReply sync_stop(ParamShardState& state, const std::string& name) {
  auto it = state.variables.find(name);
  if (it == state.variables.end()) return uninitialised(name);
  auto& barrier = state.barriers[name];
  barrier.stopped = true;
  for (auto& waiting : barrier.waiting) waiting.promise.deliver(ShardReply{it->second, ErrorCode::ok, {}});
  barrier.waiting.clear();
  return {it->second, ErrorCode::ok, {}};
}

// A variable assigned anew (its initializer, a restore): its accumulated gradients are of
// another life of it; replicas waiting on it as a global step are told.
void forget_sync_state(ParamShardState& state, const std::string& name) {
  state.accumulators.erase(name);
  auto b = state.barriers.find(name);
  if (b == state.barriers.end()) return;
  for (auto& waiting : b->second.waiting)
    waiting.promise.deliver(
        ShardReply{{},
                   ErrorCode::aborted,
                   fmt::format("the global step '{}' was assigned while this replica waited for the next step", name)});
  state.barriers.erase(b);
}
}  // namespace

bool VariableMemory::reserve(int64_t delta) {
  if (limit_ <= 0 || delta <= 0) {
    used_ += delta;
    return true;
  }
  int64_t now = used_.load();
  do {
    if (now + delta > limit_) return false;
  } while (!used_.compare_exchange_weak(now, now + delta));
  return true;
}

namespace {

// -- store --

// The names of the variables a shard holds, sorted.
std::vector<std::string> variable_names(const ParamShardState& st) {
  std::vector<std::string> names;
  for (auto& [name, value] : st.variables) names.push_back(name);
  std::sort(names.begin(), names.end());
  return names;
}

ShardReply on_read(ShardSelf self, const std::string& name) {
  auto it = self->state.variables.find(name);
  if (it == self->state.variables.end())
    return {{},
            ErrorCode::failed_precondition,
            "variable '" + name + "' is not initialised (run its initializer first)"};
  return {it->second, ErrorCode::ok, {}};
}

ShardReply on_update(ShardSelf self, const std::string& name, int32_t kind, Tensor& value, bool validate_shape) {
  auto& vars = self->state.variables;
  auto update = VariableUpdate(kind);
  auto it = vars.find(name);
  if (update == VariableUpdate::assign) {
    if (it != vars.end() && validate_shape && it->second.shape() != value.shape())
      return {{},
              ErrorCode::invalid_argument,
              "cannot assign " + value.describe() + " to variable '" + name + "' of " + it->second.describe()};
    const int64_t held = it == vars.end() ? 0 : int64_t(it->second.byte_size());
    if (auto full = reserve(self->state, int64_t(value.byte_size()) - held, name, "the value")) return *full;
    // Own the bytes: the value may be a feed or another node's output that others hold.
    Tensor owned = value.buffer_use_count() == 1 ? std::move(value) : value.copy();
    vars[name] = owned;
    forget_sync_state(self->state, name);
    return {owned, ErrorCode::ok, {}};
  }
  if (it == vars.end())
    return {{},
            ErrorCode::failed_precondition,
            "variable '" + name + "' is not initialised (run its initializer first)"};
  Tensor& current = it->second;
  if (current.buffer_use_count() > 1) current = current.copy();
  try {
    apply_variable_update(current, value, update);
  } catch (const Error& e) {
    return {{}, e.code(), "variable '" + name + "': " + e.what()};
  }
  return {current, ErrorCode::ok, {}};
}

ShardContents on_snapshot(ShardSelf self, const std::vector<OptimizerState>& wanted) {
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
}

ShardReply on_restore(ShardSelf self, ShardContents& contents) {
  auto& st = self->state;
  int64_t delta = 0;
  for (auto& [name, value] : contents.variables) {
    auto it = st.variables.find(name);
    delta += int64_t(value.byte_size()) - (it == st.variables.end() ? 0 : int64_t(it->second.byte_size()));
  }
  for (auto& o : contents.optimizers) {
    auto it = st.slots.find(slots_key(o.variable, o.spec));
    delta += bytes_of(o.slots) - (it == st.slots.end() ? 0 : bytes_of(it->second.tensors));
  }
  if (auto full = reserve(st, delta, contents.variables.empty() ? std::string() : contents.variables[0].first,
                          "the restored values"))
    return *full;
  for (auto& [name, value] : contents.variables) {
    forget_sync_state(self->state, name);
    self->state.variables[name] = std::move(value);
  }
  for (auto& o : contents.optimizers)
    self->state.slots[slots_key(o.variable, o.spec)] = {std::move(o.slots), o.step};
  return {};
}

// -- memory budget --

// What a shard holds takes from the process's variable budget; given back when it is dropped.
void release_budget(ParamShardState& st) {
  if (!st.memory) return;
  int64_t held = 0;
  for (auto& [name, value] : st.variables) held += int64_t(value.byte_size());
  for (auto& [key, slots] : st.slots) held += bytes_of(slots.tensors);
  st.memory->reserve(-held);
}

void charge_to_budget(ShardSelf self, std::shared_ptr<VariableMemory> memory) {
  self->state.memory = std::move(memory);
  // The bytes a shard holds go back to the budget when it ends.
  self->attach_functor([self] { release_budget(self->state); });
}

// -- restart --

// An exception other than the errors a handler answers with (std::bad_alloc, a bug) left the
// shard's state in doubt: a variable may be half updated. CAF would end the actor, and every
// node built with its handle would then fail until the process ended; instead the shard starts
// again in place, empty, under the same handle: its variables read as not initialised, so the
// chief's Supervisor restores them from the newest checkpoint (actors/cluster/supervisor.hpp).
std::string restart_in_place(ShardSelf self, const std::string& what) {
  auto& st = self->state;
  const std::vector<std::string> lost = variable_names(st);
  const std::string message = fmt::format(
      "the parameter shard failed ({}) and was restarted empty in place; its variable(s) {} must be "
      "initialised or restored again",
      what, lost.empty() ? std::string("(none)") : fmt::format("{}", fmt::join(lost, ", ")));
  for (auto& [name, barrier] : st.barriers)
    for (auto& waiting : barrier.waiting) waiting.promise.deliver(ShardReply{{}, ErrorCode::unavailable, message});
  release_budget(st);
  st.variables.clear();
  st.slots.clear();
  st.accumulators.clear();
  st.barriers.clear();
  st.aggregate.clear();
  report_to_stderr(message);
  return message;
}

template <class T>
struct is_result : std::false_type {};
template <class T>
struct is_result<caf::result<T>> : std::true_type {};

// `handler` with the same message signature, its exceptions contained (restart_in_place); the
// request that met one fails with the shard's message.
template <class F, class R, class... Ts>
auto contained(ShardSelf self, F handler, R (F::*)(Ts...) const) {
  using Out = std::conditional_t<is_result<R>::value, R, caf::result<R>>;
  return [self, handler](Ts... xs) -> Out {
    std::string what;
    try {
      return handler(std::forward<Ts>(xs)...);
    } catch (const std::exception& e) {
      what = e.what();
    } catch (...) {
      what = "an unknown exception";
    }
    return caf::make_error(caf::sec::runtime_error, restart_in_place(self, what));
  };
}

template <class F>
auto contain(ShardSelf self, F handler) {
  return contained(self, std::move(handler), &F::operator());
}

}  // namespace

ShardActor::behavior_type param_shard(ShardSelf self) { return budgeted_param_shard(self, nullptr); }

ShardActor::behavior_type budgeted_param_shard(ShardSelf self, std::shared_ptr<VariableMemory> memory) {
  charge_to_budget(self, std::move(memory));
  return {
      contain(self, [self](read_atom, const std::string& name) -> ShardReply { return on_read(self, name); }),
      contain(self,
              [self](update_atom, const std::string& name, int32_t kind, Tensor& value,
                     bool validate_shape) -> ShardReply { return on_update(self, name, kind, value, validate_shape); }),
      contain(self,
              [self](apply_atom, const std::string& name, const OptimizerSpec& spec, const Tensor& grad,
                     double learning_rate) -> ShardReply {
                return optimizer_step(self->state, name, spec, grad, learning_rate);
              }),
      contain(self,
              [self](sparse_apply_atom, const std::string& name, const OptimizerSpec& spec, const Tensor& values,
                     const Tensor& indices, double learning_rate) -> ShardReply {
                return sparse_optimizer_step(self->state, name, spec, values, indices, learning_rate);
              }),
      contain(self,
              [self](accumulate_atom, const std::string& name, const OptimizerSpec& spec, const Tensor& grad,
                     double learning_rate, int64_t local_step, int32_t replicas) -> ShardReply {
                return accumulate(self->state, name, spec, grad, learning_rate, local_step, replicas);
              }),
      contain(self,
              [self](sync_step_atom, const std::string& name, int64_t local_step, int32_t replicas,
                     const SyncVote& vote) -> caf::result<ShardReply> {
                return sync_step(self, name, local_step, replicas, vote);
              }),
      [self](sync_deadline_atom, const std::string& name) { sync_deadline(self, name); },
      contain(self,
              [self](sync_stop_atom, const std::string& name) -> ShardReply { return sync_stop(self->state, name); }),
      contain(self,
              [self](sync_aggregate_atom, const std::string& name, int32_t m) -> ShardReply {
                return sync_aggregate(self->state, name, m);
              }),
      contain(self,
              [self](snapshot_atom, const std::vector<OptimizerState>& wanted) { return on_snapshot(self, wanted); }),
      contain(self, [self](restore_atom, ShardContents& contents) -> ShardReply { return on_restore(self, contents); }),
      contain(self,
              [self](names_atom) { return variable_names(self->state); }),

  };
}

ParamShards::ParamShards(caf::actor_system& system, std::shared_ptr<const Graph> graph, int count,
                         std::shared_ptr<VariableMemory> memory)
    : graph_(std::move(graph)) {
  TROUPE_CHECK_ARG(count >= 1, "a session needs at least one parameter shard, got num_param_shards = {}", count);
  for (int i = 0; i < count; ++i) shards_.push_back(system.spawn(budgeted_param_shard, memory));
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
