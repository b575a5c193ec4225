// Neg, Abs, Exp, Log, Sqrt, Square, Reciprocal.
#include <cmath>
#include <type_traits>

#include "graph/gradients.hpp"
#include "ops/array/array.hpp"
#include "ops/kernel.hpp"
#include "ops/math/elementwise.hpp"
#include "ops/math/float_loops.hpp"
#include "ops/math/integer.hpp"

namespace troupe {
namespace {

// On integers Neg, Abs and Square wrap around (ops/math/integer.hpp): abs(INT32_MIN) and
// neg(INT32_MIN) are INT32_MIN, as in TensorFlow.
struct NegF {
  template <class T> static T f(T x) {
    if constexpr (std::is_integral_v<T>) return integer::wrapping_neg(x);
    else return -x;
  }
};
struct AbsF {
  template <class T> static T f(T x) {
    if constexpr (std::is_integral_v<T>) return integer::wrapping_abs(x);
    else return x < T(0) ? -x : x;
  }
};
struct ExpF { template <class T> static T f(T x) { return std::exp(x); } };
struct LogF { template <class T> static T f(T x) { return std::log(x); } };
struct SqrtF { template <class T> static T f(T x) { return std::sqrt(x); } };
struct SquareF {
  template <class T> static T f(T x) {
    if constexpr (std::is_integral_v<T>) return integer::wrapping_mul(x, x);
    else return x * x;
  }
};
struct ReciprocalF { template <class T> static T f(T x) { return T(1) / x; } };

template <class F, bool kFloatOnly>
class UnaryKernel final : public OpKernel {
 public:
  explicit UnaryKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    visit_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_same_v<T, bool> || (kFloatOnly && std::is_integral_v<T>)) {
        fail(ErrorCode::invalid_argument, "{} is not defined for {}", ctx.node().op,
             name_of(x.dtype()));
      } else {
        using C = std::conditional_t<std::is_same_v<T, half>, float, T>;
        Tensor& out = ctx.forward_or_allocate_output(0, {0}, x.dtype(), x.shape());
        const T* px = x.data<T>();
        T* po = out.data<T>();
        const int64_t n = x.num_elements();
        if constexpr (std::is_same_v<T, float>)
          if (n >= float_loops::kMinElements) return float_loops::unary_into<F>(px, po, n);
        for (int64_t i = 0; i < n; ++i) po[i] = T(F::f(C(px[i])));  // in place too: element i reads only x[i]
      }
    });
  }
};

template <class F, bool kFloatOnly>
void register_unary(const char* name) {
  OpRegistry::global().add(OpDef{
      .name = name,
      .num_inputs = 1,
      .shape_fn = [](InferenceContext& c) {
        DType t = c.input_type(0);
        if (t == DType::boolean || (kFloatOnly && !is_floating(t)))
          c.error("dtype {} is not supported", name_of(t));
        shape_fns::unchanged(c);
      }});
  KernelRegistry::global().add(name, DeviceType::cpu, [](const Node& n) {
    return std::unique_ptr<OpKernel>(new UnaryKernel<F, kFloatOnly>(n));
  });
}

const bool registered = [] {
  register_unary<NegF, false>("Neg");
  register_unary<AbsF, false>("Abs");
  register_unary<ExpF, true>("Exp");
  register_unary<LogF, true>("Log");
  register_unary<SqrtF, true>("Sqrt");
  register_unary<SquareF, false>("Square");
  register_unary<ReciprocalF, true>("Reciprocal");
  return true;
}();

using Grads = std::vector<Output>;

const bool gradients_registered = [] {
  auto& r = GradientRegistry::global();
  r.add("Neg", [](const Scope& s, const Node&, const Grads& g) -> Grads { return {ops::neg(s, g[0])}; });
  r.add("Abs", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    auto x = input_of(s, n, 0);
    auto zero = ops::zeros_like(s, x);
    auto sign = ops::sub(s, ops::cast(s, ops::greater(s, x, zero), x.dtype()),
                         ops::cast(s, ops::less(s, x, zero), x.dtype()));
    return {ops::mul(s, g[0], sign)};
  });
  r.add("Exp", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    return {ops::mul(s, g[0], output_of(s, n))};
  });
  r.add("Log", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    return {ops::div(s, g[0], input_of(s, n, 0))};
  });
  r.add("Sqrt", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    auto y = output_of(s, n);
    return {ops::div(s, g[0], ops::add(s, y, y))};
  });
  r.add("Square", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    auto x = input_of(s, n, 0);
    return {ops::mul(s, g[0], ops::add(s, x, x))};
  });
  r.add("Reciprocal", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    auto y = output_of(s, n);
    return {ops::neg(s, ops::mul(s, g[0], ops::mul(s, y, y)))};
  });
  return true;
}();

}  // namespace

namespace ops {

#define TROUPE_UNARY_BUILDER(fn, op) \
  Output fn(const Scope& scope, Output x) { return &scope.add(op, {x}); }
TROUPE_UNARY_BUILDER(neg, "Neg")
TROUPE_UNARY_BUILDER(abs, "Abs")
TROUPE_UNARY_BUILDER(exp, "Exp")
TROUPE_UNARY_BUILDER(log, "Log")
TROUPE_UNARY_BUILDER(sqrt, "Sqrt")
TROUPE_UNARY_BUILDER(square, "Square")
TROUPE_UNARY_BUILDER(reciprocal, "Reciprocal")
#undef TROUPE_UNARY_BUILDER

}  // namespace ops
}  // namespace troupe
