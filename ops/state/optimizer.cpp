#include "ops/state/optimizer.hpp"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>

#include "graph/gradients.hpp"
#include "ops/all.hpp"
#include "ops/kernel.hpp"
#include "ops/math/float_loops.hpp"

namespace troupe {
namespace {

const char* kind_names[] = {"sgd", "momentum", "adagrad", "adadelta", "rmsprop", "adam"};

OptimizerKind kind_from_name(const std::string& name) {
  for (int k = 0; k < 6; ++k)
    if (name == kind_names[k]) return OptimizerKind(k);
  fail(ErrorCode::invalid_argument, "unknown optimizer '{}'", name);
}

// The gradient and learning rate an update of the variable named by "shared_name" takes:
// inputs 0 and 1 of ApplyGradient and AccumulateGradient.
void check_update_inputs(InferenceContext& c) {
  DType t = c.attr<DType>("dtype");
  if (c.input_type(0) != t)
    c.error("gradient has dtype {}, the variable '{}' holds {}", name_of(c.input_type(0)),
            c.attr<std::string>("shared_name"), name_of(t));
  if (!c.attr<PartialShape>("shape").compatible_with(c.input_shape(0)))
    c.error("gradient has shape {}, the variable '{}' has shape {}", c.input_shape(0).to_string(),
            c.attr<std::string>("shared_name"), c.attr<PartialShape>("shape").to_string());
  if (!is_floating(c.input_type(1)) || (c.input_shape(1).rank_known() && c.input_shape(1).rank() != 0))
    c.error("learning rate must be a floating scalar, got {}{}", name_of(c.input_type(1)),
            c.input_shape(1).to_string());
  kind_from_name(c.attr<std::string>("optimizer"));
}

// Input `i` is an int64 scalar (`what` names it in the error).
void check_int64_scalar_input(InferenceContext& c, int i, const char* what) {
  if (c.input_type(i) != DType::int64 || (c.input_shape(i).rank_known() && c.input_shape(i).rank() != 0))
    c.error("input {} must be {}, got {}{}", i, what, name_of(c.input_type(i)), c.input_shape(i).to_string());
}

// An int64 scalar input: a global step (the synchronous replicas' ops).
void check_step_input(InferenceContext& c, int i) {
  check_int64_scalar_input(c, i, "the int64 scalar global step");
  if (c.attr<int64_t>("replicas_to_aggregate") < 1)
    c.error("replicas_to_aggregate must be positive, got {}", c.attr<int64_t>("replicas_to_aggregate"));
}

// ApplyGradient(grad, learning_rate): one optimizer step on the variable named by
// "shared_name", done by its parameter shard. No outputs: a target, or a control input.
TROUPE_REGISTER_OP(OpDef{
    .name = "ApplyGradient",
    .num_inputs = 2,
    .num_outputs = 0,
    .stateful = true,
    .variable_op = true,
    .shape_fn = check_update_inputs,
    .required_attrs = {"shared_name", "dtype", "shape", "optimizer"}});

// SparseApplyGradient(values, indices, learning_rate): one optimizer step on the rows of the
// variable "shared_name" that indices names, values their gradients (indices.shape +
// the variable's shape[1:]); done by its parameter shard (apply_optimizer_to_rows).
TROUPE_REGISTER_OP(OpDef{
    .name = "SparseApplyGradient",
    .num_inputs = 3,
    .num_outputs = 0,
    .stateful = true,
    .variable_op = true,
    .shape_fn = [](InferenceContext& c) {
      DType t = c.attr<DType>("dtype");
      const auto& var = c.attr<PartialShape>("shape");
      const std::string& name = c.attr<std::string>("shared_name");
      if (c.input_type(0) != t)
        c.error("sparse gradient has dtype {}, the variable '{}' holds {}", name_of(c.input_type(0)), name, name_of(t));
      if (c.input_type(1) != DType::int32 && c.input_type(1) != DType::int64)
        c.error("the rows of a sparse gradient of '{}' must be int32 or int64, got {}", name, name_of(c.input_type(1)));
      const auto& values = c.input_shape(0);
      const auto& rows = c.input_shape(1);
      if (var.rank_known() && var.rank() < 1) c.error("the variable '{}' is a scalar: it has no rows", name);
      if (var.rank_known() && rows.rank_known() && values.rank_known()) {
        std::vector<int64_t> expected = rows.dims();
        for (int d = 1; d < var.rank(); ++d) expected.push_back(var.dim(d));
        if (!PartialShape::from_dims(expected).compatible_with(values))
          c.error("sparse gradient has shape {}, rows {} of the variable '{}' of shape {} need {}", values.to_string(),
                  rows.to_string(), name, var.to_string(), PartialShape::from_dims(expected).to_string());
      }
      if (!is_floating(c.input_type(2)) || (c.input_shape(2).rank_known() && c.input_shape(2).rank() != 0))
        c.error("learning rate must be a floating scalar, got {}{}", name_of(c.input_type(2)),
                c.input_shape(2).to_string());
      kind_from_name(c.attr<std::string>("optimizer"));
    },
    .required_attrs = {"shared_name", "dtype", "shape", "optimizer"}});

// AccumulateGradient(grad, learning_rate, local_step) -> dropped: a synchronous replica's
// gradient of global step local_step, added to the variable's accumulator in its shard, whose
// replicas_to_aggregate-th gradient of the step applies their average
// (ops/state/sync_replicas.hpp). dropped: int64 1 if the step had passed (not applied), else 0.
TROUPE_REGISTER_OP(OpDef{
    .name = "AccumulateGradient",
    .num_inputs = 3,
    .stateful = true,
    .variable_op = true,
    .shape_fn = [](InferenceContext& c) {
      check_update_inputs(c);
      check_step_input(c, 2);
      c.set_output(0, DType::int64, PartialShape{});
    },
    .required_attrs = {"shared_name", "dtype", "shape", "optimizer", "replicas_to_aggregate"}});

// SyncReplicasStep(local_step) -> next_step: a replica's vote that its gradients of local_step
// are in; answered with the new global step once replicas_to_aggregate replicas voted for it
// (at once for a step that has passed). Runs on the global step's shard ("shared_name").
TROUPE_REGISTER_OP(OpDef{
    .name = "SyncReplicasStep",
    .num_inputs = 1,
    .stateful = true,
    .variable_op = true,
    .shape_fn = [](InferenceContext& c) {
      check_step_input(c, 0);
      c.set_output(0, DType::int64, PartialShape{});
    },
    .required_attrs = {"shared_name", "replicas_to_aggregate"}});

// SyncReplicasStop() -> global_step: training has ended; the replicas waiting on the global
// step "shared_name" for a step that will not come are answered, and so is every later vote.
TROUPE_REGISTER_OP(OpDef{
    .name = "SyncReplicasStop",
    .num_inputs = 0,
    .stateful = true,
    .variable_op = true,
    .shape_fn = [](InferenceContext& c) { c.set_output(0, DType::int64, PartialShape{}); },
    .required_attrs = {"shared_name"}});

// SyncReplicasAggregate(m) -> m: from now on the variable "shared_name" (an accumulator, or the
// global step's votes) completes a step with m gradients (votes) instead of its ops'
// replicas_to_aggregate, never more; 0 goes back to theirs. A step that has m already is
// completed at once. The Supervisor lowers m so while a replica is lost (ops/state/sync_replicas.hpp).
TROUPE_REGISTER_OP(OpDef{
    .name = "SyncReplicasAggregate",
    .num_inputs = 1,
    .stateful = true,
    .variable_op = true,
    .shape_fn = [](InferenceContext& c) {
      check_int64_scalar_input(c, 0, "an int64 scalar (the replicas to aggregate)");
      c.set_output(0, DType::int64, PartialShape{});
    },
    .required_attrs = {"shared_name"}});

TROUPE_REGISTER_OP(OpDef{
    .name = "Floor",
    .num_inputs = 1,
    .shape_fn = [](InferenceContext& c) {
      if (!is_floating(c.input_type(0))) c.error("takes a floating type, got {}", name_of(c.input_type(0)));
      shape_fns::unchanged(c);
    }});

class FloorKernel final : public OpKernel {
 public:
  explicit FloorKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.allocate_output(0, x.dtype(), x.shape());
    visit_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_floating_point_v<T>) {
        for (int64_t i = 0; i < x.num_elements(); ++i) y.data<T>()[i] = std::floor(x.data<T>()[i]);
      } else if constexpr (std::is_same_v<T, half>) {
        for (int64_t i = 0; i < x.num_elements(); ++i) y.data<T>()[i] = half(std::floor(float(x.data<T>()[i])));
      } else {
        fail(ErrorCode::invalid_argument, "Floor takes a floating type, got {}", x.describe());
      }
    });
  }
};
TROUPE_REGISTER_KERNEL("Floor", DeviceType::cpu, FloorKernel);
// Floor is piecewise constant: no gradient flows through it.
const bool floor_gradient = (GradientRegistry::global().add_none("Floor"), true);
const bool apply_gradient = (GradientRegistry::global().add_none("ApplyGradient"),
                             GradientRegistry::global().add_none("AccumulateGradient"),
                             GradientRegistry::global().add_none("SparseApplyGradient"),
                             GradientRegistry::global().add_none("SyncReplicasStep"),
                             GradientRegistry::global().add_none("SyncReplicasStop"),
                             GradientRegistry::global().add_none("SyncReplicasAggregate"), true);

// The variable, its slots and the gradient never alias: __restrict__ lets the loops vectorise.
// Compiled for AVX2 besides the baseline, as the elementwise kernels are (float_loops.hpp), with
// no multiply-add fused (ops/CMakeLists.txt: -ffp-contract=off): an element's update is the same
// bits in a vectorized body and in a remainder, so a variable split over parameter servers
// trains exactly as it does whole.
template <class T>
TROUPE_CLONES("arch=x86-64-v3", "default")
void update(const OptimizerSpec& s, T* __restrict__ v, std::vector<T*>& slot, const T* __restrict__ g, int64_t n,
            double lr, int64_t step) {
  const T rate = T(lr), eps = T(s.epsilon);
  switch (s.kind) {
    case OptimizerKind::sgd:
      for (int64_t i = 0; i < n; ++i) v[i] -= rate * g[i];
      return;
    case OptimizerKind::momentum: {
      const T m = T(s.momentum);
      T* __restrict__ a = slot[0];
      for (int64_t i = 0; i < n; ++i) {
        a[i] = m * a[i] + g[i];
        v[i] -= s.nesterov ? rate * (g[i] + m * a[i]) : rate * a[i];
      }
      return;
    }
    case OptimizerKind::adagrad: {
      T* __restrict__ acc = slot[0];
      for (int64_t i = 0; i < n; ++i) {
        acc[i] += g[i] * g[i];
        v[i] -= rate * g[i] / std::sqrt(acc[i]);
      }
      return;
    }
    case OptimizerKind::adadelta: {
      const T rho = T(s.rho);
      T *__restrict__ acc = slot[0], *__restrict__ acc_update = slot[1];
      for (int64_t i = 0; i < n; ++i) {
        acc[i] = rho * acc[i] + (T(1) - rho) * g[i] * g[i];
        T u = std::sqrt(acc_update[i] + eps) / std::sqrt(acc[i] + eps) * g[i];
        acc_update[i] = rho * acc_update[i] + (T(1) - rho) * u * u;
        v[i] -= rate * u;
      }
      return;
    }
    case OptimizerKind::rmsprop: {
      const T rho = T(s.rho), m = T(s.momentum);
      T *__restrict__ ms = slot[0], *__restrict__ mom = slot[1];
      for (int64_t i = 0; i < n; ++i) {
        ms[i] = rho * ms[i] + (T(1) - rho) * g[i] * g[i];
        mom[i] = m * mom[i] + rate * g[i] / std::sqrt(ms[i] + eps);
        v[i] -= mom[i];
      }
      return;
    }
    case OptimizerKind::adam: {
      const T b1 = T(s.beta1), b2 = T(s.beta2);
      const T rate_t = T(lr * std::sqrt(1 - std::pow(s.beta2, double(step))) / (1 - std::pow(s.beta1, double(step))));
      T *__restrict__ m = slot[0], *__restrict__ u = slot[1];
      for (int64_t i = 0; i < n; ++i) {
        m[i] = b1 * m[i] + (T(1) - b1) * g[i];
        u[i] = b2 * u[i] + (T(1) - b2) * g[i] * g[i];
        v[i] -= rate_t * m[i] / (std::sqrt(u[i]) + eps);
      }
      return;
    }
  }
}

}  // namespace

int OptimizerSpec::num_slots() const {
  switch (kind) {
    case OptimizerKind::sgd: return 0;
    case OptimizerKind::momentum:
    case OptimizerKind::adagrad: return 1;
    default: return 2;
  }
}

const char* OptimizerSpec::name() const { return kind_names[int(kind)]; }

const char* OptimizerSpec::slot_name(int k) const {
  TROUPE_CHECK_ARG(k >= 0 && k < num_slots(), "optimizer '{}' has {} slot(s), asked for slot {}", name(),
                   num_slots(), k);
  switch (kind) {
    case OptimizerKind::rmsprop: return k == 0 ? "ms" : "mom";
    case OptimizerKind::adam: return k == 0 ? "m" : "v";
    default: return k == 0 ? "accumulator" : "accumulator_update";
  }
}

namespace {

template <class T>
void update_slice(const OptimizerSpec& spec, Tensor& var, std::vector<Tensor>& slots, const Tensor& grad,
                  double learning_rate, int64_t step, int64_t begin, int64_t end) {
  std::vector<T*> s;
  for (auto& t : slots) s.push_back(t.data<T>() + begin);
  update(spec, var.data<T>() + begin, s, grad.data<T>() + begin, end - begin, learning_rate, step);
}

void check_update(const OptimizerSpec& spec, const Tensor& var, const std::vector<Tensor>& slots,
                  const Tensor& grad) {
  if (grad.dtype() != var.dtype() || grad.shape() != var.shape())
    fail(ErrorCode::invalid_argument, "gradient {} does not match the variable's value {}",
         grad.describe(), var.describe());
  if (int(slots.size()) != spec.num_slots())
    fail(ErrorCode::internal, "{} needs {} slots, got {}", spec.name(), spec.num_slots(), slots.size());
  if (var.dtype() != DType::float32 && var.dtype() != DType::float64)
    fail(ErrorCode::invalid_argument, "{} updates float32 or float64 variables, not {}", spec.name(),
         var.describe());
}

}  // namespace

void apply_optimizer_in_parallel(const OptimizerSpec& spec, Tensor& var, std::vector<Tensor>& slots,
                                 const Tensor& grad, double learning_rate, int64_t step) {
  check_update(spec, var, slots, grad);
  // Every optimizer updates element by element: slices of whole cache lines go to the
  // threads of the calling team.
  const int64_t n = var.num_elements();
  const bool f32 = var.dtype() == DType::float32;
#pragma omp parallel
  {
    const int64_t threads = omp_get_num_threads(), me = omp_get_thread_num();
    const int64_t per = ((n + threads - 1) / threads + 15) / 16 * 16;
    const int64_t begin = std::min(n, me * per), end = std::min(n, begin + per);
    if (begin < end) {
      if (f32) update_slice<float>(spec, var, slots, grad, learning_rate, step, begin, end);
      else update_slice<double>(spec, var, slots, grad, learning_rate, step, begin, end);
    }
  }
}

void apply_optimizer(const OptimizerSpec& spec, Tensor& var, std::vector<Tensor>& slots,
                     const Tensor& grad, double learning_rate, int64_t step) {
  check_update(spec, var, slots, grad);
  const int64_t n = var.num_elements();
  if (var.dtype() == DType::float32) update_slice<float>(spec, var, slots, grad, learning_rate, step, 0, n);
  else update_slice<double>(spec, var, slots, grad, learning_rate, step, 0, n);
}

namespace {

// The rows `indices` names, each once, and the sum of its gradients, [unique, row_elements].
template <class I>
void unique_rows(const Tensor& indices, int64_t rows, std::vector<int64_t>& unique, std::vector<int64_t>& first_of) {
  const I* p = indices.data<I>();
  std::unordered_map<int64_t, int64_t> position;
  position.reserve(std::size_t(indices.num_elements()));
  for (int64_t i = 0; i < indices.num_elements(); ++i) {
    const int64_t row = int64_t(p[i]);
    if (row < 0 || row >= rows)
      fail(ErrorCode::invalid_argument, "index {} (position {} of the sparse gradient) is outside the variable's {} rows",
           row, i, rows);
    auto [it, added] = position.emplace(row, int64_t(unique.size()));
    if (added) unique.push_back(row);
    first_of.push_back(it->second);
  }
}

template <class T>
void update_rows(const OptimizerSpec& spec, Tensor& var, std::vector<Tensor>& slots, const Tensor& values,
                 const std::vector<int64_t>& unique, const std::vector<int64_t>& slot_of, double learning_rate,
                 int64_t step) {
  const int64_t width = var.shape()[0] ? var.num_elements() / var.shape()[0] : 0;
  const T* g = values.data<T>();
  std::vector<T> summed;
  if (unique.size() != slot_of.size()) {  // duplicates: one gradient per row
    summed.assign(unique.size() * std::size_t(width), T(0));
    for (std::size_t i = 0; i < slot_of.size(); ++i)
      for (int64_t e = 0; e < width; ++e) summed[std::size_t(slot_of[i] * width + e)] += g[int64_t(i) * width + e];
    g = summed.data();
  }
  std::vector<T*> s(slots.size());
  for (std::size_t u = 0; u < unique.size(); ++u) {
    const int64_t offset = unique[u] * width;
    for (std::size_t k = 0; k < slots.size(); ++k) s[k] = slots[k].data<T>() + offset;
    update(spec, var.data<T>() + offset, s, g + int64_t(u) * width, width, learning_rate, step);
  }
}

}  // namespace

void apply_optimizer_to_rows(const OptimizerSpec& spec, Tensor& var, std::vector<Tensor>& slots, const Tensor& values,
                             const Tensor& indices, double learning_rate, int64_t step) {
  if (var.shape().rank() < 1)
    fail(ErrorCode::invalid_argument, "a sparse gradient updates rows; the variable is the scalar {}", var.describe());
  if (indices.dtype() != DType::int32 && indices.dtype() != DType::int64)
    fail(ErrorCode::invalid_argument, "the rows of a sparse gradient are int32 or int64, got {}", indices.describe());
  Shape expected = indices.shape();
  for (int d = 1; d < var.shape().rank(); ++d) expected.push_back(var.shape()[d]);
  if (values.dtype() != var.dtype() || values.shape() != expected)
    fail(ErrorCode::invalid_argument, "sparse gradient {} for rows {} does not fit the variable's value {} (expected {}{})",
         values.describe(), indices.describe(), var.describe(), name_of(var.dtype()), expected.to_string());
  if (int(slots.size()) != spec.num_slots())
    fail(ErrorCode::internal, "{} needs {} slots, got {}", spec.name(), spec.num_slots(), slots.size());
  std::vector<int64_t> unique, slot_of;
  if (indices.dtype() == DType::int32) unique_rows<int32_t>(indices, var.shape()[0], unique, slot_of);
  else unique_rows<int64_t>(indices, var.shape()[0], unique, slot_of);
  if (var.dtype() == DType::float32) update_rows<float>(spec, var, slots, values, unique, slot_of, learning_rate, step);
  else if (var.dtype() == DType::float64) update_rows<double>(spec, var, slots, values, unique, slot_of, learning_rate, step);
  else fail(ErrorCode::invalid_argument, "{} updates float32 or float64 variables, not {}", spec.name(), var.describe());
}

OptimizerSpec optimizer_spec_of(const Node& node) {
  const auto& a = node.attrs;
  OptimizerSpec s;
  s.kind = kind_from_name(get_attr<std::string>(a, "optimizer", node.name));
  s.momentum = get_attr_or<double>(a, "momentum", s.momentum);
  s.nesterov = get_attr_or<bool>(a, "nesterov", s.nesterov);
  s.initial_accumulator = get_attr_or<double>(a, "initial_accumulator", s.initial_accumulator);
  s.rho = get_attr_or<double>(a, "rho", s.rho);
  s.beta1 = get_attr_or<double>(a, "beta1", s.beta1);
  s.beta2 = get_attr_or<double>(a, "beta2", s.beta2);
  s.epsilon = get_attr_or<double>(a, "epsilon", s.epsilon);
  return s;
}

namespace ops {

std::vector<Output> trainable_variables(const Graph& graph) {
  std::vector<Output> out;
  for (int i = 0; i < graph.size(); ++i) {
    const Node& n = graph.node(i);
    if (n.op == "VariableV2" && get_attr_or<bool>(n.attrs, "trainable", true) && is_floating(n.output_types[0]))
      out.push_back(Output(const_cast<Node*>(&n), 0));
  }
  return out;
}

GlobalStep global_step(const Scope& scope) {
  auto v = variable(scope.with_op_name("global_step"), Shape{}, DType::int64,
                    {.shared_name = "global_step", .trainable = false});
  auto init = assign(scope.with_op_name("global_step/init"), v, constant(scope, int64_t(0)));
  set_initializer(v, init);
  return {v, init.node()};
}

Output exponential_decay(const Scope& scope, double learning_rate, Output global_step,
                         double decay_steps, double decay_rate, bool staircase) {
  TROUPE_CHECK_ARG(decay_steps > 0, "exponential_decay: decay_steps must be positive, got {}", decay_steps);
  Scope s = scope.sub("exponential_decay");
  Output p = div(s, cast(s, global_step, DType::float32), constant(s, float(decay_steps)));
  if (staircase) p = Output(&s.add("Floor", {p}));
  return mul(s, constant(s, float(learning_rate)), pow(s, constant(s, float(decay_rate)), p));
}

Output step_decay(const Scope& scope, double learning_rate, Output global_step, double step_size,
                  double factor) {
  TROUPE_CHECK_ARG(step_size > 0, "step_decay: step_size must be positive, got {}", step_size);
  Scope s = scope.sub("step_decay");
  Output p = Output(&s.add("Floor", {div(s, cast(s, global_step, DType::float32), constant(s, float(step_size)))}));
  return mul(s, constant(s, float(learning_rate)), pow(s, constant(s, float(factor)), p));
}

}  // namespace ops

Optimizer Optimizer::sgd(LearningRate lr) {
  Optimizer o;
  o.learning_rate_ = lr;
  return o;
}

Optimizer Optimizer::momentum(LearningRate lr, double m, bool nesterov) {
  Optimizer o = sgd(lr);
  o.spec_.kind = OptimizerKind::momentum;
  o.spec_.momentum = m;
  o.spec_.nesterov = nesterov;
  return o;
}

Optimizer Optimizer::adagrad(LearningRate lr, double initial_accumulator) {
  Optimizer o = sgd(lr);
  o.spec_.kind = OptimizerKind::adagrad;
  o.spec_.initial_accumulator = initial_accumulator;
  return o;
}

Optimizer Optimizer::adadelta(LearningRate lr, double rho, double epsilon) {
  Optimizer o = sgd(lr);
  o.spec_.kind = OptimizerKind::adadelta;
  o.spec_.rho = rho;
  o.spec_.epsilon = epsilon;
  return o;
}

Optimizer Optimizer::rmsprop(LearningRate lr, double decay, double momentum, double epsilon) {
  Optimizer o = sgd(lr);
  o.spec_.kind = OptimizerKind::rmsprop;
  o.spec_.rho = decay;
  o.spec_.momentum = momentum;
  o.spec_.epsilon = epsilon;
  return o;
}

Optimizer Optimizer::adam(LearningRate lr, double beta1, double beta2, double epsilon) {
  Optimizer o = sgd(lr);
  o.spec_.kind = OptimizerKind::adam;
  o.spec_.beta1 = beta1;
  o.spec_.beta2 = beta2;
  o.spec_.epsilon = epsilon;
  return o;
}


std::vector<Output> Optimizer::variables_to_train(const Graph& g, std::vector<Output> variables) {
  if (variables.empty()) {
    variables = ops::trainable_variables(g);
    if (variables.empty()) {
      // Say what was found: a model whose variables are all integers has variables, just none
      // that gradients can train.
      std::vector<std::string> found;
      for (int i = 0; i < g.size(); ++i) {
        const Node& n = g.node(i);
        if (n.op == "VariableV2" && get_attr_or<bool>(n.attrs, "trainable", true))
          found.push_back(fmt::format("'{}' ({})", n.name, name_of(n.output_types[0])));
      }
      TROUPE_CHECK_ARG(found.empty(), "minimize: the trainable variables found are not floating point ({}); "
                       "gradients exist only for float16, float32 and float64 variables",
                       fmt::join(found, ", "));
      fail(ErrorCode::invalid_argument, "minimize: the graph has no trainable variables");
    }
  }
  for (auto& v : variables)
    TROUPE_CHECK_ARG(v && is_floating(v.dtype()), "minimize: variable '{}' is {}; only floating-point variables "
                     "can be trained", v ? v.node()->name : "(empty)", v ? name_of(v.dtype()) : "nothing");
  return variables;
}

Output Optimizer::learning_rate_tensor(const Scope& scope) const {
  Output lr = learning_rate_.tensor ? learning_rate_.tensor
                                    : ops::constant(scope.with_op_name("learning_rate"), float(learning_rate_.value));
  TROUPE_CHECK_ARG(is_floating(lr.dtype()) && (!lr.shape().rank_known() || lr.shape().rank() == 0),
                   "{}: the learning rate must be a floating-point scalar, got {} {} ('{}')", spec_.name(),
                   name_of(lr.dtype()), lr.shape().to_string(), lr.name());
  return lr;
}

AttrMap Optimizer::update_attrs(const Node& v) const {
  return {{"shared_name", variable_name(v)},
          {"dtype", v.attrs.at("dtype")},
          {"shape", v.attrs.at("shape")},
          {"optimizer", std::string(spec_.name())},
          {"momentum", spec_.momentum},
          {"nesterov", spec_.nesterov},
          {"initial_accumulator", spec_.initial_accumulator},
          {"rho", spec_.rho},
          {"beta1", spec_.beta1},
          {"beta2", spec_.beta2},
          {"epsilon", spec_.epsilon}};
}

namespace {

// The nodes the loss depends on through data edges.
std::vector<bool> ancestors_of(const Graph& graph, const Node& loss) {
  std::vector<bool> seen(std::size_t(graph.size()), false);
  std::vector<int> todo{loss.id};
  while (!todo.empty()) {
    const int id = todo.back();
    todo.pop_back();
    if (seen[std::size_t(id)]) continue;
    seen[std::size_t(id)] = true;
    for (const Endpoint& e : graph.node(id).inputs) todo.push_back(e.node);
  }
  return seen;
}

// A variable the loss reads only through Gather nodes (an embedding table, or a part of one):
// its gradient is the gathers' output gradients, applied to the rows they read. Readers the
// loss does not depend on (the whole of a partitioned variable, for a checkpoint or a
// summary) do not count.
std::vector<Node*> gathers_of(const Graph& graph, const Graph::Edges& edges, const std::vector<bool>& to_loss,
                              const Node& variable) {
  std::vector<Node*> gathers;
  for (const Consumer& c : edges.data[variable.id][0]) {
    if (!to_loss[std::size_t(c.node)]) continue;
    Node& n = const_cast<Node&>(graph.node(c.node));
    if (n.op != "Gather" || c.slot != 0 || !loop_frame(n).empty()) return {};
    gathers.push_back(&n);
  }
  return gathers;
}

}  // namespace

Node* Optimizer::minimize(const Scope& scope, Output loss, std::vector<Output> variables,
                          Output global_step) const {
  variables = variables_to_train(scope.graph(), std::move(variables));
  const Graph& graph = scope.graph();
  const Graph::Edges edges = graph.out_edges();
  // The gradients of dense variables, and those of the gathers' outputs of sparse ones.
  const std::vector<bool> to_loss = ancestors_of(graph, *loss.node());
  std::vector<std::vector<Node*>> gathers;
  std::vector<Output> xs;
  for (auto& v : variables) {
    gathers.push_back(gathers_of(graph, edges, to_loss, *v.node()));
    if (gathers.back().empty()) xs.push_back(v);
    for (Node* g : gathers.back()) xs.push_back(Output(g, 0));
  }
  // stop_at_xs: the gathers' own gradients (dense, the table's size) are not built.
  auto grads = gradients(scope, {loss}, xs, {}, {.stop_at_xs = true});
  std::vector<Update> updates;
  std::size_t next = 0;
  for (std::size_t i = 0; i < variables.size(); ++i) {
    if (gathers[i].empty()) {
      updates.push_back({variables[i], grads[next++], {}});
      continue;
    }
    std::vector<Output> values, rows;
    for (Node* g : gathers[i]) {
      if (grads[next]) {
        values.push_back(grads[next]);
        rows.push_back(Output(&scope.graph().node(g->inputs[1].node), g->inputs[1].port));
      }
      ++next;
    }
    if (values.size() > 1) {  // one update of the rows of every gather
      Scope s = scope.sub("gradients").sub(variables[i].node()->name + "_rows");
      std::vector<int64_t> dims{-1};
      for (int d = 1; d < variables[i].shape().rank(); ++d) dims.push_back(variables[i].shape().dim(d));
      for (std::size_t k = 0; k < values.size(); ++k) {
        values[k] = ops::reshape(s, values[k], dims);
        rows[k] = ops::reshape(s, rows[k].dtype() == DType::int64 ? rows[k] : ops::cast(s, rows[k], DType::int64), {-1});
      }
      values = {ops::concat(s, values, 0)};
      rows = {ops::concat(s, rows, 0)};
    }
    if (!values.empty()) updates.push_back({variables[i], values[0], rows[0]});
  }
  return apply(scope, updates, global_step);
}

Node* Optimizer::apply_gradients(const Scope& scope, const std::vector<Output>& grads,
                                 const std::vector<Output>& variables, Output global_step) const {
  TROUPE_CHECK_ARG(grads.size() == variables.size(), "apply_gradients: {} gradients for {} variables",
                   grads.size(), variables.size());
  std::vector<Update> updates;
  for (std::size_t i = 0; i < variables.size(); ++i) updates.push_back({variables[i], grads[i], {}});
  return apply(scope, updates, global_step);
}

Node* Optimizer::apply(const Scope& scope, const std::vector<Update>& todo, Output global_step) const {
  Scope s = scope.sub(spec_.name());
  Output lr = learning_rate_tensor(s);
  // Each update waits for the nodes of the gradient computation that read its variable (the
  // backward op that multiplies by the weights runs beside the one that yields their
  // gradient): the shard then updates the weights in place instead of copying them because a
  // reader of this step still holds the old value. TensorFlow's gate_gradients=GATE_OP.
  const Graph& graph = scope.graph();
  std::vector<bool> in_backward(std::size_t(graph.size()), false);  // the gradients' ancestors
  std::vector<int> ancestors;
  for (auto& u : todo) {
    if (u.grad) ancestors.push_back(u.grad.node()->id);
    if (u.rows) ancestors.push_back(u.rows.node()->id);
  }
  while (!ancestors.empty()) {
    int id = ancestors.back();
    ancestors.pop_back();
    if (in_backward[id]) continue;
    in_backward[id] = true;
    const Node& n = graph.node(id);
    for (const Endpoint& e : n.inputs) ancestors.push_back(e.node);
    for (int c : n.control_inputs) ancestors.push_back(c);
  }
  const Graph::Edges edges = graph.out_edges();
  std::vector<Node*> updates;
  for (const Update& u : todo) {
    if (!u.grad) continue;  // the loss does not depend on this variable
    Node* v = u.variable.node();
    TROUPE_CHECK_ARG(v->op == "VariableV2", "apply_gradients: {} is not a variable", v->describe());
    // The update runs where its variable lives, whatever device the scope asks for (as
    // TensorFlow's optimizers place it with the variable): on a cluster, in the variable's ps task.
    const Scope at_variable = s.colocate_with(*v);
    Output rate = lr.dtype() == v->output_types[0] ? lr : ops::cast(at_variable, lr, v->output_types[0]);
    std::vector<Output> readers;
    // A reader inside a while loop (the Enter that brings the weights into it) sends a signal
    // per iteration, in the loop's frame, so it cannot gate the update; the loop's gradient,
    // which the update waits for, comes out of the loop after its reads anyway.
    for (const Consumer& c : edges.data[v->id][0])
      if (in_backward[c.node] && loop_frame(graph.node(c.node)).empty())
        readers.push_back(Output(&scope.graph().node(c.node)));
    const Scope gated = readers.empty() ? at_variable : at_variable.with_control_dependencies(readers);
    if (u.rows)
      updates.push_back(&gated.add("SparseApplyGradient", {u.grad, u.rows, rate}, update_attrs(*v), "apply_" + v->name));
    else
      updates.push_back(&gated.add("ApplyGradient", {u.grad, rate}, update_attrs(*v), "apply_" + v->name));
  }
  TROUPE_CHECK_ARG(!updates.empty(), "apply_gradients: no variable receives a gradient");
  if (global_step) {
    Scope after = s.with_control_dependencies(updates);
    auto bump = ops::assign_add(after, global_step, ops::constant(s, int64_t(1)));
    return ops::group(scope.with_op_name(std::string("train_") + spec_.name()), {bump});
  }
  return ops::no_op(scope.with_control_dependencies(updates).with_op_name(std::string("train_") + spec_.name()));
}

}  // namespace troupe
