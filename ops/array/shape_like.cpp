#include "ops/array/shape_like.hpp"

#include "graph/gradients.hpp"
#include "ops/array/array.hpp"
#include "ops/kernel.hpp"
#include "ops/math/broadcast.hpp"
#include "ops/math/elementwise.hpp"
#include "ops/math/reduce.hpp"
#include "ops/math/reduced_axes.hpp"

namespace troupe {
namespace {

// Output 0: the dtype of input 0 under the shape of input 1.
void like_input_1(InferenceContext& c) { c.set_output(0, c.input_type(0), c.input_shape(1)); }

TROUPE_REGISTER_OP(OpDef{.name = "SumToShapeOf", .num_inputs = 2, .shape_fn = like_input_1});
TROUPE_REGISTER_OP(OpDef{.name = "ReductionGrad", .num_inputs = 2, .shape_fn = like_input_1});
TROUPE_REGISTER_OP(OpDef{.name = "ReshapeLike", .num_inputs = 2, .shape_fn = like_input_1});

template <class F>
void visit_float(const Tensor& t, F&& f) {
  visit_dtype(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, half>) f(zero);
    else fail(ErrorCode::invalid_argument, "gradients are defined for floating types, got {}", t.describe());
  });
}

class SumToShapeOfKernel final : public OpKernel {
 public:
  explicit SumToShapeOfKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    const Shape& target = ctx.input(1).shape();
    if (g.shape() == target) {
      ctx.set_output(0, g);
      return;
    }
    if (broadcast_shapes(g.shape(), target) != g.shape())
      fail(ErrorCode::invalid_argument, "gradient {} does not reduce to shape {}", g.describe(),
           target.to_string());
    visit_float(g, [&](auto zero) {
      using T = decltype(zero);
      using C = std::conditional_t<std::is_same_v<T, half>, float, T>;
      std::vector<double> acc(std::size_t(target.num_elements()), 0.0);
      const T* pg = g.data<T>();
      for_each_broadcast(g.shape(), g.shape(), target,
                         [&](int64_t i, int64_t, int64_t it) { acc[it] += double(C(pg[i])); });
      T* po = ctx.allocate_output(0, g.dtype(), target).template data<T>();
      for (std::size_t i = 0; i < acc.size(); ++i) po[i] = T(C(acc[i]));
    });
  }
};
TROUPE_REGISTER_KERNEL("SumToShapeOf", DeviceType::cpu, SumToShapeOfKernel);

class ReductionGradKernel final : public OpKernel {
 public:
  explicit ReductionGradKernel(const Node& node)
      : mean_(get_attr_or<bool>(node.attrs, "mean", false)),
        reduce_all_(get_attr_or<bool>(node.attrs, "reduce_all", false)),
        axes_(get_attr_or<std::vector<int64_t>>(node.attrs, "axes", {})) {}
  void compute(KernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    const Shape& target = ctx.input(1).shape();
    // The reduced shape with the reduced axes kept as 1: g's elements in that layout.
    uint32_t reduced = reduced_axes(axes_, target.rank());  // every named axis checked
    if (reduce_all_) reduced = reduced_axes(std::nullopt, target.rank());
    Shape kept;
    int64_t count = 1;
    for (int d = 0; d < target.rank(); ++d) {
      kept.push_back(is_reduced(reduced, d) ? 1 : target[d]);
      if (is_reduced(reduced, d)) count *= target[d];
    }
    Tensor gk = g.reshaped(kept);
    visit_float(g, [&](auto zero) {
      using T = decltype(zero);
      using C = std::conditional_t<std::is_same_v<T, half>, float, T>;
      const T* pg = gk.data<T>();
      T* po = ctx.allocate_output(0, g.dtype(), target).template data<T>();
      const C scale = mean_ ? C(1) / C(count ? count : 1) : C(1);
      for_each_broadcast(target, kept, target,
                         [&](int64_t i, int64_t ig, int64_t) { po[i] = T(C(pg[ig]) * scale); });
    });
  }

 private:
  bool mean_;
  bool reduce_all_;
  // The named axes (none: none reduced, unless reduce_all_), read once, not at every firing.
  std::optional<std::vector<int64_t>> axes_;
};
TROUPE_REGISTER_KERNEL("ReductionGrad", DeviceType::cpu, ReductionGradKernel);

class ReshapeLikeKernel final : public OpKernel {
 public:
  explicit ReshapeLikeKernel(const Node&) {}
  void compute(KernelContext& ctx) override { ctx.set_output(0, ctx.input(0).reshaped(ctx.input(1).shape())); }
};
TROUPE_REGISTER_KERNEL("ReshapeLike", DeviceType::cpu, ReshapeLikeKernel);

// Gradients of the gradient-fitting ops, for second derivatives. Each is linear in its first
// input; the second gives only a shape and gets no gradient.
using Grads = std::vector<Output>;

const bool gradients_registered = [] {
  auto& r = GradientRegistry::global();
  // SumToShapeOf sums over the axes along which `like` broadcasts to grad: its gradient
  // broadcasts back, which is what adding zeros of grad's shape does.
  r.add("SumToShapeOf", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    return {ops::add(s, ops::zeros_like(s, input_of(s, n, 0)), g[0]), Output()};
  });
  // ReductionGrad spreads its input over the reduced axes (scaled for a mean): its gradient
  // reduces over them again, in the input's layout.
  r.add("ReductionGrad", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    std::optional<std::vector<int64_t>> axes;
    if (!get_attr_or<bool>(n.attrs, "reduce_all", false))
      axes = get_attr_or<std::vector<int64_t>>(n.attrs, "axes", {});
    const bool mean = get_attr_or<bool>(n.attrs, "mean", false);
    auto reduced = mean ? ops::mean(s, g[0], axes) : ops::sum(s, g[0], axes);
    return {ops::reshape_like(s, reduced, input_of(s, n, 0)), Output()};
  });
  r.add("ReshapeLike", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    return {ops::reshape_like(s, g[0], input_of(s, n, 0)), Output()};
  });
  return true;
}();

}  // namespace

namespace ops {

Output sum_to_shape_of(const Scope& scope, Output grad, Output like) {
  return &scope.add("SumToShapeOf", {grad, like});
}

Output reduction_grad(const Scope& scope, Output grad, Output like,
                      std::optional<std::vector<int64_t>> axes, bool mean) {
  return &scope.add("ReductionGrad", {grad, like},
                    {{"axes", axes.value_or(std::vector<int64_t>{})},
                     {"reduce_all", !axes.has_value()},
                     {"mean", mean}});
}

Output reshape_like(const Scope& scope, Output x, Output like) {
  return &scope.add("ReshapeLike", {x, like});
}

Output fit_gradient(const Scope& scope, Output grad, Output x) {
  if (grad.shape().fully_defined() && grad.shape() == x.shape()) return grad;
  return sum_to_shape_of(scope, grad, x);
}

}  // namespace ops
}  // namespace troupe
