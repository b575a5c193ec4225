#include "ops/nn/activation.hpp"

#include <cmath>

#include "graph/gradients.hpp"
#include "ops/kernel.hpp"

namespace troupe {
namespace {

struct ReluF {
  template <class T> static T f(T x) { return x > T(0) ? x : T(0); }
  template <class T> static T df(T y, T g) { return y > T(0) ? g : T(0); }
};
struct SigmoidF {
  template <class T> static T f(T x) { return T(1) / (T(1) + std::exp(-x)); }
  template <class T> static T df(T y, T g) { return g * y * (T(1) - y); }
};
struct TanhF {
  template <class T> static T f(T x) { return std::tanh(x); }
  template <class T> static T df(T y, T g) { return g * (T(1) - y * y); }
};
struct EluF {
  template <class T> static T f(T x) { return x > T(0) ? x : std::expm1(x); }
  template <class T> static T df(T y, T g) { return y > T(0) ? g : g * (y + T(1)); }
};

// y = F(x)
template <class F>
class ActivationKernel final : public OpKernel {
 public:
  explicit ActivationKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    visit_float32_or_64(x, ctx.node().op.c_str(), [&](auto zero) {
      using T = decltype(zero);
      const T* __restrict__ px = x.data<T>();
      T* __restrict__ py = ctx.allocate_output(0, x.dtype(), x.shape()).template data<T>();
      const int64_t n = x.num_elements();
      for (int64_t i = 0; i < n; ++i) py[i] = F::f(px[i]);
    });
  }
};

// dx = F'(x) * g, from y and g
template <class F>
class ActivationGradKernel final : public OpKernel {
 public:
  explicit ActivationGradKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    const Tensor& y = ctx.input(1);
    if (g.shape() != y.shape() || g.dtype() != y.dtype())
      fail(ErrorCode::invalid_argument, "gradient {} does not match output {}", g.describe(), y.describe());
    visit_float32_or_64(y, ctx.node().op.c_str(), [&](auto zero) {
      using T = decltype(zero);
      const T* __restrict__ pg = g.data<T>();
      const T* __restrict__ py = y.data<T>();
      T* __restrict__ pd = ctx.allocate_output(0, y.dtype(), y.shape()).template data<T>();
      const int64_t n = y.num_elements();
      for (int64_t i = 0; i < n; ++i) pd[i] = F::df(py[i], pg[i]);
    });
  }
};

void float_unary_shape(InferenceContext& c) {
  DType t = c.input_type(c.num_inputs() - 1);
  if (t != DType::float32 && t != DType::float64) c.error("takes float32 or float64, got {}", name_of(t));
  c.set_output(0, t, c.input_shape(c.num_inputs() - 1));
}

template <class F>
void register_activation(const std::string& name) {
  const std::string grad = name + "Grad";
  OpRegistry::global().add(OpDef{.name = name, .num_inputs = 1, .shape_fn = float_unary_shape});
  OpRegistry::global().add(OpDef{.name = grad, .num_inputs = 2, .shape_fn = float_unary_shape});
  KernelRegistry::global().add(name, DeviceType::cpu, [](const Node& n) {
    return std::unique_ptr<OpKernel>(new ActivationKernel<F>(n));
  });
  KernelRegistry::global().add(grad, DeviceType::cpu, [](const Node& n) {
    return std::unique_ptr<OpKernel>(new ActivationGradKernel<F>(n));
  });
  GradientRegistry::global().add(name, [grad](const Scope& s, const Node& n, const std::vector<Output>& g) {
    return std::vector<Output>{Output(&s.add(grad, {g[0], output_of(s, n)}))};
  });
}

const bool registered = [] {
  register_activation<ReluF>("Relu");
  register_activation<SigmoidF>("Sigmoid");
  register_activation<TanhF>("Tanh");
  register_activation<EluF>("Elu");
  return true;
}();

}  // namespace

namespace ops {
Output relu(const Scope& scope, Output x) { return &scope.add("Relu", {x}); }
Output sigmoid(const Scope& scope, Output x) { return &scope.add("Sigmoid", {x}); }
Output tanh(const Scope& scope, Output x) { return &scope.add("Tanh", {x}); }
Output elu(const Scope& scope, Output x) { return &scope.add("Elu", {x}); }
}  // namespace ops
}  // namespace troupe
