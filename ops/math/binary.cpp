// Add, Sub, Mul, Div, TruncateDiv, FloorDiv, TruncateMod, FloorMod, Pow, Maximum, Minimum and
// the comparisons, with broadcasting.
#include <cmath>
#include <type_traits>

#include "graph/gradients.hpp"
#include "ops/array/array.hpp"
#include "ops/array/shape_like.hpp"
#include "ops/kernel.hpp"
#include "ops/math/broadcast.hpp"
#include "ops/math/elementwise.hpp"
#include "ops/math/float_loops.hpp"
#include "ops/math/integer.hpp"

namespace troupe {
namespace {

template <class T>
using compute_t = std::conditional_t<std::is_same_v<T, half>, float, T>;

// Integer operands: add, sub, mul and pow wrap around (ops/math/integer.hpp); a zero divisor
// and the smallest value divided by -1 fail the step. Float operands follow IEEE 754.
struct AddF { template <class T> static T f(T a, T b) { return integer::wrapping_add(a, b); } };
struct SubF { template <class T> static T f(T a, T b) { return integer::wrapping_sub(a, b); } };
struct MulF { template <class T> static T f(T a, T b) { return integer::wrapping_mul(a, b); } };

template <class T>
void check_integer_divisor(T a, T b, const char* what) {
  if (b == T(0)) fail(ErrorCode::invalid_argument, "integer {} by zero ({} / 0)", what, a);
  if (integer::division_overflows(a, b))
    fail(ErrorCode::invalid_argument, "integer {} overflows: {} / -1 does not fit {}", what, a,
         name_of(dtype_v<T>));
}

// Div truncates integer quotients toward zero (C++, and TensorFlow's Div and TruncateDiv
// kernels); FloorDiv rounds them toward negative infinity (Python's //, tf.math.floordiv).
struct TruncateDivF {
  template <class T> static T f(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      check_integer_divisor(a, b, "division");
      return T(a / b);
    } else {
      return std::trunc(a / b);
    }
  }
};
struct DivF {
  template <class T> static T f(T a, T b) {
    if constexpr (std::is_integral_v<T>) return TruncateDivF::f(a, b);
    else return a / b;
  }
};
struct FloorDivF {
  template <class T> static T f(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      check_integer_divisor(a, b, "division");
      T q = T(a / b);
      if (a % b != 0 && ((a < T(0)) != (b < T(0)))) q = T(q - 1);
      return q;
    } else {
      return std::floor(a / b);
    }
  }
};
// TruncateMod's remainder has the sign of a (C++'s %, std::fmod); FloorMod's that of b
// (Python's %), so that a == FloorDiv(a, b) * b + FloorMod(a, b).
struct TruncateModF {
  template <class T> static T f(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      if (b == T(0)) fail(ErrorCode::invalid_argument, "integer modulo by zero ({} % 0)", a);
      return integer::truncated_remainder(a, b);
    } else {
      return std::fmod(a, b);
    }
  }
};
struct FloorModF {
  template <class T> static T f(T a, T b) {
    T r = TruncateModF::f(a, b);
    if (r != T(0) && ((r < T(0)) != (b < T(0)))) r = T(r + b);
    return r;
  }
};
struct PowF {
  template <class T> static T f(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      if (b < T(0))
        fail(ErrorCode::invalid_argument, "integers cannot be raised to negative powers ({} ^ {})", a, b);
      T r = 1;  // by squaring, wrapping around like mul
      for (auto e = std::make_unsigned_t<T>(b); e != 0; e >>= 1) {
        if (e & 1) r = integer::wrapping_mul(r, a);
        a = integer::wrapping_mul(a, a);
      }
      return r;
    } else {
      return std::pow(a, b);
    }
  }
};
struct MaxF { template <class T> static T f(T a, T b) { return a < b ? b : a; } };
struct MinF { template <class T> static T f(T a, T b) { return b < a ? b : a; } };
struct EqF { template <class T> static bool f(T a, T b) { return a == b; } };
struct NeF { template <class T> static bool f(T a, T b) { return a != b; } };
struct LtF { template <class T> static bool f(T a, T b) { return a < b; } };
struct LeF { template <class T> static bool f(T a, T b) { return a <= b; } };
struct GtF { template <class T> static bool f(T a, T b) { return a > b; } };
struct GeF { template <class T> static bool f(T a, T b) { return a >= b; } };

enum class Accepts { numbers, numbers_and_bool };

bool accepted(DType t, Accepts which) {
  if (t == DType::boolean) return which == Accepts::numbers_and_bool;
  return t != DType::invalid;
}

template <class F, bool kComparison>
class BinaryKernel final : public OpKernel {
 public:
  explicit BinaryKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.dtype() != b.dtype())
      fail(ErrorCode::invalid_argument, "operands have dtypes {} and {}", name_of(a.dtype()),
           name_of(b.dtype()));
    Shape out_shape = a.shape() == b.shape() ? a.shape() : broadcast_shapes(a.shape(), b.shape());
    visit_dtype(a.dtype(), [&](auto zero) {
      using T = decltype(zero);
      using C = compute_t<T>;
      if constexpr (std::is_same_v<T, bool> && !kComparison) {
        fail(ErrorCode::invalid_argument, "{} is not defined for bool", ctx.node().op);
      } else {
        using R = std::conditional_t<kComparison, bool, T>;
        // Over an operand of the output's shape where it can be (its index is then always the
        // output's, so the broadcast loop below reads each of its elements before writing it).
        Tensor& out = ctx.forward_or_allocate_output(0, {0, 1}, dtype_v<R>, out_shape);
        const T* pa = a.data<T>();
        const T* pb = b.data<T>();
        R* po = out.data<R>();
        if constexpr (std::is_same_v<T, float> && !kComparison) {
          // Equal shapes, or one operand a single element: the cloned loops (float_loops.hpp).
          const int64_t n = out_shape.num_elements(), na = a.num_elements(), nb = b.num_elements();
          if (n >= float_loops::kMinElements && (na == n || na == 1) && (nb == n || nb == 1))
            return float_loops::binary_into<F>(pa, na == 1, pb, nb == 1, po, n);
        }
        for_each_broadcast(out_shape, a.shape(), b.shape(), [&](int64_t i, int64_t ia, int64_t ib) {
          po[i] = R(F::f(C(pa[ia]), C(pb[ib])));
        });
      }
    });
  }
};

void register_binary(const char* name, bool comparison, Accepts accepts) {
  OpRegistry::global().add(OpDef{
      .name = name,
      .num_inputs = 2,
      .shape_fn = [comparison, accepts](InferenceContext& c) {
        DType t = c.same_input_types();
        if (!accepted(t, accepts)) c.error("dtype {} is not supported", name_of(t));
        comparison ? shape_fns::comparison(c) : shape_fns::broadcast_binary(c);
      }});
}

template <class F>
void register_arith(const char* name) {
  register_binary(name, false, Accepts::numbers);
  KernelRegistry::global().add(name, DeviceType::cpu, [](const Node& n) {
    return std::unique_ptr<OpKernel>(new BinaryKernel<F, false>(n));
  });
}

template <class F>
void register_comparison(const char* name, Accepts accepts) {
  register_binary(name, true, accepts);
  KernelRegistry::global().add(name, DeviceType::cpu, [](const Node& n) {
    return std::unique_ptr<OpKernel>(new BinaryKernel<F, true>(n));
  });
}

const bool registered = [] {
  register_arith<AddF>("Add");
  register_arith<SubF>("Sub");
  register_arith<MulF>("Mul");
  register_arith<DivF>("Div");
  register_arith<TruncateDivF>("TruncateDiv");
  register_arith<FloorDivF>("FloorDiv");
  register_arith<TruncateModF>("TruncateMod");
  register_arith<FloorModF>("FloorMod");
  register_arith<PowF>("Pow");
  register_arith<MaxF>("Maximum");
  register_arith<MinF>("Minimum");
  register_comparison<EqF>("Equal", Accepts::numbers_and_bool);
  register_comparison<NeF>("NotEqual", Accepts::numbers_and_bool);
  register_comparison<LtF>("Less", Accepts::numbers);
  register_comparison<LeF>("LessEqual", Accepts::numbers);
  register_comparison<GtF>("Greater", Accepts::numbers);
  register_comparison<GeF>("GreaterEqual", Accepts::numbers);
  return true;
}();

// Gradients. Each partial is summed back to its operand's shape (broadcasting).
using Grads = std::vector<Output>;

Output as_mask(const Scope& s, Output condition, DType dtype) {
  return ops::cast(s, condition, dtype);
}

const bool gradients_registered = [] {
  auto& r = GradientRegistry::global();
  r.add("Add", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    auto a = input_of(s, n, 0), b = input_of(s, n, 1);
    return {ops::fit_gradient(s, g[0], a), ops::fit_gradient(s, g[0], b)};
  });
  r.add("Sub", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    auto a = input_of(s, n, 0), b = input_of(s, n, 1);
    return {ops::fit_gradient(s, g[0], a), ops::fit_gradient(s, ops::neg(s, g[0]), b)};
  });
  r.add("Mul", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    auto a = input_of(s, n, 0), b = input_of(s, n, 1);
    return {ops::fit_gradient(s, ops::mul(s, g[0], b), a),
            ops::fit_gradient(s, ops::mul(s, g[0], a), b)};
  });
  r.add("Div", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    auto a = input_of(s, n, 0), b = input_of(s, n, 1);
    auto db = ops::neg(s, ops::mul(s, g[0], ops::div(s, ops::div(s, a, b), b)));
    return {ops::fit_gradient(s, ops::div(s, g[0], b), a), ops::fit_gradient(s, db, b)};
  });
  // The quotients are piecewise constant; the remainders are a - q * b for the quotient q.
  r.add_none("TruncateDiv");
  r.add_none("FloorDiv");
  auto remainder = [](Output (*quotient)(const Scope&, Output, Output)) {
    return [quotient](const Scope& s, const Node& n, const Grads& g) -> Grads {
      auto a = input_of(s, n, 0), b = input_of(s, n, 1);
      auto db = ops::neg(s, ops::mul(s, g[0], quotient(s, a, b)));
      return {ops::fit_gradient(s, g[0], a), ops::fit_gradient(s, db, b)};
    };
  };
  r.add("TruncateMod", remainder(ops::truncate_div));
  r.add("FloorMod", remainder(ops::floor_div));
  r.add("Pow", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    auto a = input_of(s, n, 0), b = input_of(s, n, 1), y = output_of(s, n);
    auto da = ops::mul(s, g[0], ops::mul(s, b, ops::pow(s, a, ops::sub(s, b, ops::ones_like(s, b)))));
    // d/db a^b = log(a) a^b, taken as 0 where a <= 0 (as TensorFlow does).
    auto positive = as_mask(s, ops::greater(s, a, ops::zeros_like(s, a)), a.dtype());
    auto safe_a = ops::add(s, ops::mul(s, a, positive), ops::sub(s, ops::ones_like(s, a), positive));
    auto db = ops::mul(s, g[0], ops::mul(s, ops::log(s, safe_a), y));
    return {ops::fit_gradient(s, da, a), ops::fit_gradient(s, db, b)};
  });
  // Maximum and Minimum: the gradient goes to the operand that was chosen (a on ties).
  auto select = [](bool max) {
    return [max](const Scope& s, const Node& n, const Grads& g) -> Grads {
      auto a = input_of(s, n, 0), b = input_of(s, n, 1);
      auto pick_a = as_mask(s, max ? ops::greater_equal(s, a, b) : ops::less_equal(s, a, b), a.dtype());
      auto ga = ops::mul(s, g[0], pick_a);
      auto gb = ops::sub(s, g[0], ga);
      return {ops::fit_gradient(s, ga, a), ops::fit_gradient(s, gb, b)};
    };
  };
  r.add("Maximum", select(true));
  r.add("Minimum", select(false));
  for (const char* op : {"Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual"})
    r.add_none(op);
  return true;
}();

}  // namespace

namespace ops {

#define TROUPE_BINARY_BUILDER(fn, op) \
  Output fn(const Scope& scope, Output a, Output b) { return &scope.add(op, {a, b}); }
TROUPE_BINARY_BUILDER(add, "Add")
TROUPE_BINARY_BUILDER(sub, "Sub")
TROUPE_BINARY_BUILDER(mul, "Mul")
TROUPE_BINARY_BUILDER(div, "Div")
TROUPE_BINARY_BUILDER(truncate_div, "TruncateDiv")
TROUPE_BINARY_BUILDER(floor_div, "FloorDiv")
TROUPE_BINARY_BUILDER(truncate_mod, "TruncateMod")
TROUPE_BINARY_BUILDER(floor_mod, "FloorMod")
TROUPE_BINARY_BUILDER(pow, "Pow")
TROUPE_BINARY_BUILDER(maximum, "Maximum")
TROUPE_BINARY_BUILDER(minimum, "Minimum")
TROUPE_BINARY_BUILDER(equal, "Equal")
TROUPE_BINARY_BUILDER(not_equal, "NotEqual")
TROUPE_BINARY_BUILDER(less, "Less")
TROUPE_BINARY_BUILDER(less_equal, "LessEqual")
TROUPE_BINARY_BUILDER(greater, "Greater")
TROUPE_BINARY_BUILDER(greater_equal, "GreaterEqual")
#undef TROUPE_BINARY_BUILDER

}  // namespace ops
}  // namespace troupe
