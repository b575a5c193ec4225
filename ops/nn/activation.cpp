#include "ops/nn/activation.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "graph/gradients.hpp"
#include "ops/array/array.hpp"
#include "ops/kernel.hpp"
#include "ops/math/elementwise.hpp"
#include "ops/math/float_loops.hpp"

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
// a where `pick`, else b, with bit masks: the x86-64 baseline (SSE2) has no blend, and GCC keeps a
// ?: on floats as a branch, which stops the loop's vectorization.
inline float select(bool pick, float a, float b) {
  const uint32_t m = 0u - uint32_t(pick);
  return std::bit_cast<float>((std::bit_cast<uint32_t>(a) & m) | (std::bit_cast<uint32_t>(b) & ~m));
}

// tanh of a float32 without libm, in a form the compiler vectorizes (no branch: a ?: on floats
// is a select): tanh|x| = m / (m + 2) with m = expm1(2|x|), |x| clamped at 9 (tanh is 1 in
// float32 beyond). m = 2^k (q + 1) - 1 = 2^k q + (2^k - 1), with t = 2|x| = k ln 2 + r, k =
// floor(t / ln 2), r in [0, ln 2) and q = expm1(r) = r + r^2 h(r): both terms are >= 0, so
// nothing cancels, and for |x| < ln2/2 (k = 0) m is q itself, exact to its last bits near 0.
// h is a degree-4 polynomial fitted to (expm1(r) - r) / r^2 on [0, ln 2] (least squares
// reweighted toward the largest error: 1.3e-8 relative in expm1). Within 4 float32 ulps of
// libm's tanhf over every float32 in [0, 10] (checked exhaustively, with and without FMA; the
// test sweeps its ranges); NaN stays NaN, -0 stays -0. One path for every element, not a series
// for small |x| and an exponential for the rest with a pick between them: vectorized, every
// element would pay for both (docs/performance.md, "Measured settings and kernels").
inline float tanh_float32(float x) {
  const float a = std::fabs(x);
  const float t = 2.0f * select(a < 9.0f, a, 9.0f);  // NaN: 18, so the conversion below is defined
  const int32_t k = int32_t(t * 1.44269504f);          // t >= 0: truncation is the floor
  const float kf = float(k);
  const float r = (t - kf * 0.693145751953125f) - kf * 1.42860676533018e-06f;  // ln 2 in two parts
  const float h = 0.5000008940696716f +
                  r * (0.16664738953113556f + r * (0.04179594665765762f + r * (0.007960888557136059f + r * 0.0018613218562677503f)));
  const float q = r + r * r * h;
  const float scale = std::bit_cast<float>(uint32_t(k + 127) << 23);  // 2^k
  const float m = scale * q + (scale - 1.0f);
  return select(x != x, x, std::copysign(m / (m + 2.0f), x));
}

// tanh over n float32s, in blocks: a block whose every |x| is 9 or more (or NaN) is +-1 (NaN)
// without the exponential, as libm's tanhf returns at once for large arguments. Compiled for
// x86-64-v4 (AVX-512) and x86-64-v3 (AVX2 and FMA) besides the baseline, the one the CPU has
// chosen at load time: the baseline's 4-wide division is most of a tanh's cost.
// The blocks' loop, for both entry points below: x and y apart, or the same (in place: each
// block's elements are read for its least |x| before any is written, and y[i] reads only x[i]).
template <class In, class Out>
[[gnu::always_inline]] inline void tanh_blocks(In x, Out y, int64_t n) {
  constexpr int64_t kBlock = 256;
  constexpr uint32_t kNine = 0x41100000u;  // the bits of 9.0f; |x|'s bits compare as integers
  for (int64_t start = 0; start < n; start += kBlock) {
    const int64_t end = std::min(n, start + kBlock);
    uint32_t least = 0xffffffffu;
    for (int64_t i = start; i < end; ++i) least = std::min(least, std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu);
    if (least >= kNine) {
      for (int64_t i = start; i < end; ++i) y[i] = select(x[i] != x[i], x[i], std::copysign(1.0f, x[i]));
    } else {
      for (int64_t i = start; i < end; ++i) y[i] = tanh_float32(x[i]);
    }
  }
}

TROUPE_CLONES("arch=x86-64-v4", "arch=x86-64-v3", "default")
void tanh_float32(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  tanh_blocks<const float* __restrict__, float* __restrict__>(x, y, n);
}

// Over a forwarded input (KernelContext::forward_or_allocate_output).
TROUPE_CLONES("arch=x86-64-v4", "arch=x86-64-v3", "default")
void tanh_float32_in_place(float* y, int64_t n) { tanh_blocks(y, y, n); }

struct TanhF {
  template <class T> static T f(T x) { return std::tanh(x); }  // float64; float32 goes through apply
  // y may be x (a forwarded input), as for float_loops::unary_into.
  static void apply(const float* x, float* y, int64_t n) {
    if (y == x) return tanh_float32_in_place(y, n);
    tanh_float32(x, y, n);
  }
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
      const T* px = x.data<T>();
      T* py = ctx.forward_or_allocate_output(0, {0}, x.dtype(), x.shape()).template data<T>();
      const int64_t n = x.num_elements();
      if constexpr (requires { F::apply(px, py, n); }) {
        F::apply(px, py, n);
      } else {
        if constexpr (std::is_same_v<T, float>)
          if (n >= float_loops::kMinElements) return float_loops::unary_into<F>(px, py, n);
        for (int64_t i = 0; i < n; ++i) py[i] = F::f(px[i]);  // in place too: y[i] reads only x[i]
      }
    });
  }
};

// F's derivative as a binary function of (y, g), for float_loops::binary.
template <class F>
struct Df {
  static float f(float y, float g) { return F::df(y, g); }
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
      const T* pg = g.data<T>();
      const T* py = y.data<T>();
      // Over g where it can be (the gradient flowing back is most often this node's alone; y is
      // kept by the forward pass's other readers).
      T* pd = ctx.forward_or_allocate_output(0, {0, 1}, y.dtype(), y.shape()).template data<T>();
      const int64_t n = y.num_elements();
      if constexpr (std::is_same_v<T, float>)
        if (n >= float_loops::kMinElements) return float_loops::binary_into<Df<F>>(py, false, pg, false, pd, n);
      for (int64_t i = 0; i < n; ++i) pd[i] = F::df(py[i], pg[i]);  // in place too: element i only
    });
  }
};

void float_unary_shape(InferenceContext& c) {
  DType t = c.input_type(c.num_inputs() - 1);
  if (t != DType::float32 && t != DType::float64) c.error("takes float32 or float64, got {}", name_of(t));
  c.set_output(0, t, c.input_shape(c.num_inputs() - 1));
}

// Gradients of the XGrad ops, for second derivatives. XGrad(g, y) = F'(x) g is linear in g,
// with F' written in terms of y = F(x); the gradient reaching y then goes on to x through X's
// own gradient. gg is the gradient reaching XGrad's output.
using Grads = std::vector<Output>;
using SecondOrder = Grads (*)(const Scope& s, const Node& grad_node, Output gg, Output g, Output y);

Output same_op(const Scope& s, const Node& grad_node, Output gg, Output y) {
  return Output(&s.add(grad_node.op, {gg, y}));
}

// ReluGrad: g where y > 0; a step in y, whose derivative is zero.
Grads relu_second(const Scope& s, const Node& n, Output gg, Output, Output y) {
  return {same_op(s, n, gg, y), ops::zeros_like(s, y)};
}
// SigmoidGrad: g y (1 - y); d/dy = g (1 - 2y).
Grads sigmoid_second(const Scope& s, const Node& n, Output gg, Output g, Output y) {
  auto one_minus_2y = ops::sub(s, ops::ones_like(s, y), ops::add(s, y, y));
  return {same_op(s, n, gg, y), ops::mul(s, ops::mul(s, gg, g), one_minus_2y)};
}
// TanhGrad: g (1 - y^2); d/dy = -2 g y.
Grads tanh_second(const Scope& s, const Node& n, Output gg, Output g, Output y) {
  return {same_op(s, n, gg, y), ops::neg(s, ops::mul(s, ops::mul(s, gg, g), ops::add(s, y, y)))};
}
// EluGrad: g where y > 0, g (y + 1) elsewhere; d/dy = g where y <= 0.
Grads elu_second(const Scope& s, const Node& n, Output gg, Output g, Output y) {
  auto below = ops::cast(s, ops::less_equal(s, y, ops::zeros_like(s, y)), y.dtype());
  return {same_op(s, n, gg, y), ops::mul(s, ops::mul(s, gg, g), below)};
}

template <class F>
void register_activation(const std::string& name, SecondOrder second) {
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
  GradientRegistry::global().add(grad, [second](const Scope& s, const Node& n, const Grads& gg) {
    return second(s, n, gg[0], input_of(s, n, 0), input_of(s, n, 1));
  });
}

const bool registered = [] {
  register_activation<ReluF>("Relu", relu_second);
  register_activation<SigmoidF>("Sigmoid", sigmoid_second);
  register_activation<TanhF>("Tanh", tanh_second);
  register_activation<EluF>("Elu", elu_second);
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
