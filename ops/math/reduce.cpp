// Sum, Mean, Max over chosen axes. Accumulates float types in double and integers in int64
// (wrapping around past its range, and on conversion to int32 or uint8, like the integer Add).
#include "ops/math/reduce.hpp"

#include <algorithm>
#include <array>
#include <limits>
#include <optional>

#include "graph/gradients.hpp"
#include "ops/array/array.hpp"
#include "ops/array/shape_like.hpp"
#include "ops/kernel.hpp"
#include "ops/math/elementwise.hpp"
#include "ops/math/integer.hpp"
#include "ops/math/float_loops.hpp"
#include "ops/math/reduced_axes.hpp"

namespace troupe {

std::optional<std::vector<int64_t>> axes_of(const AttrMap& attrs, const std::string& owner) {
  if (get_attr_or<bool>(attrs, "reduce_all", false)) return std::nullopt;
  return get_attr<std::vector<int64_t>>(attrs, "axes", owner);
}

uint32_t reduced_axes(const std::optional<std::vector<int64_t>>& axes, int rank) {
  if (rank > Shape::kMaxRank)
    fail(ErrorCode::invalid_argument, "a tensor of rank {} cannot be reduced (at most rank {})", rank, Shape::kMaxRank);
  if (!axes) return (uint32_t(1) << rank) - 1;
  uint32_t reduced = 0;
  for (int64_t a : *axes) {
    int64_t axis = a < 0 ? a + rank : a;
    if (axis < 0 || axis >= rank)
      fail(ErrorCode::invalid_argument, "axis {} is out of range for a tensor of rank {}", a, rank);
    reduced |= uint32_t(1) << axis;
  }
  return reduced;
}

namespace {

enum class Reduction { sum, mean, max };

void reduce_shape(InferenceContext& c) {
  DType t = c.input_type(0);
  if (t == DType::boolean) c.error("dtype bool is not supported");
  bool keep = c.attr_or<bool>("keep_dims", false);
  auto& in = c.input_shape(0);
  if (!in.rank_known()) {
    c.set_output(0, t, PartialShape::unknown());
    return;
  }
  uint32_t reduced = 0;
  try {
    reduced = reduced_axes(axes_of(c.attrs(), c.node_name()), in.rank());
  } catch (const Error& e) {
    c.error("{}", e.what());
  }
  std::vector<int64_t> dims;
  for (int i = 0; i < in.rank(); ++i) {
    if (!is_reduced(reduced, i)) dims.push_back(in.dim(i));
    else if (keep) dims.push_back(1);
  }
  c.set_output(0, t, PartialShape::from_dims(dims));
}

// Folds v into the accumulator as reduction R does.
template <Reduction R, class Acc>
inline Acc fold(Acc acc, Acc v) {
  if constexpr (R == Reduction::max) return std::max(acc, v);
  else if constexpr (std::is_integral_v<Acc>) return integer::wrapping_add(acc, v);
  else return acc + v;
}

template <class T, class Acc>
inline Acc widen(T x) {
  return Acc(std::conditional_t<std::is_same_v<T, half>, float, T>(x));
}

// R over `len` contiguous elements, in kLanes independent accumulators folded into `acc` at
// the end: the additions of one chain wait for each other, and sixteen chains are what the
// compiler turns into vector registers (a float32 sum's float64 lanes: eight SSE2 registers, or
// four AVX2 ones in the clone an AVX2 CPU gets at load time; docs/performance.md, "Measured
// settings and kernels").
template <Reduction R, class T, class Acc>
TROUPE_CLONES("avx2", "default") Acc fold_run(Acc acc, const T* p, int64_t len) {
  constexpr int kLanes = 16;
  Acc a[kLanes];
  a[0] = acc;
  for (int k = 1; k < kLanes; ++k) a[k] = R == Reduction::max ? acc : Acc(0);
  int64_t i = 0;
  for (; i + kLanes <= len; i += kLanes)
    for (int k = 0; k < kLanes; ++k) a[k] = fold<R>(a[k], widen<T, Acc>(p[i + k]));
  for (; i < len; ++i) a[0] = fold<R>(a[0], widen<T, Acc>(p[i]));
  for (int width = kLanes / 2; width >= 1; width /= 2)
    for (int k = 0; k < width; ++k) a[k] = fold<R>(a[k], a[k + width]);
  return a[0];
}

template <Reduction R>
class ReduceKernel final : public OpKernel {
 public:
  explicit ReduceKernel(const Node& node)
      : node_(node), keep_(get_attr_or<bool>(node.attrs, "keep_dims", false)), axes_(axes_of(node.attrs, node.name)) {}

  void compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Shape& in = x.shape();
    const uint32_t reduced = reduced_axes(axes_, in.rank());
    Shape out_shape, kept_shape;  // kept_shape: rank of input, 1 on reduced axes
    int64_t count = 1;
    for (int i = 0; i < in.rank(); ++i) {
      if (is_reduced(reduced, i)) {
        count *= in[i];
        if (keep_) out_shape.push_back(1);
        kept_shape.push_back(1);
      } else {
        out_shape.push_back(in[i]);
        kept_shape.push_back(in[i]);
      }
    }
    visit_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_same_v<T, bool>) {
        fail(ErrorCode::invalid_argument, "{} is not defined for bool", node_.op);
      } else {
        using Acc = std::conditional_t<std::is_integral_v<T>, int64_t, double>;
        const int64_t n_out = out_shape.num_elements();
        // The accumulators: in the frame for a few outputs (a whole tensor's sum, a loss), so
        // that such a firing allocates nothing beyond its output.
        constexpr int64_t kFew = 16;
        const Acc start = R == Reduction::max ? std::numeric_limits<Acc>::lowest() : Acc(0);
        std::array<Acc, kFew> few;
        std::vector<Acc> many;
        Acc* acc = few.data();
        if (n_out > kFew) {
          many.assign(std::size_t(n_out), start);
          acc = many.data();
        } else {
          std::fill(few.begin(), few.begin() + n_out, start);
        }
        // Output offset of each input element: strides of kept_shape, 0 on reduced axes.
        const int rank = in.rank();
        std::array<int64_t, Shape::kMaxRank> ostride{}, idx{};
        int64_t s = 1;
        for (int d = rank - 1; d >= 0; --d) {
          ostride[d] = is_reduced(reduced, d) ? 0 : s;
          s *= kept_shape[d];
        }
        const T* px = x.data<T>();
        const int64_t n = x.num_elements();
        // The common layouts, over contiguous runs: the reduced axes are the last ones (each
        // output is the fold of one run of `count` elements: reduce_all, a row's sum), or the
        // first ones (each of `count` runs of n_out elements folds into the outputs: a batch's
        // column sums). Any other set of axes steps through the input index by index.
        int first_reduced = rank, last_reduced = -1, first_kept = rank, last_kept = -1;
        for (int d = 0; d < rank; ++d) {
          if (is_reduced(reduced, d)) {
            first_reduced = std::min(first_reduced, d);
            last_reduced = d;
          } else {
            first_kept = std::min(first_kept, d);
            last_kept = d;
          }
        }
        const bool trailing = last_kept < first_reduced;  // kept axes, then reduced ones
        const bool leading = last_reduced < first_kept;   // reduced axes, then kept ones
        if (n == 0) {
          // nothing to fold
        } else if (trailing) {
          for (int64_t j = 0; j < n_out; ++j) acc[j] = fold_run<R, T, Acc>(acc[j], px + j * count, count);
        } else if (leading) {
          for (int64_t i = 0; i < count; ++i) {
            const T* row = px + i * n_out;
            for (int64_t j = 0; j < n_out; ++j) acc[j] = fold<R>(acc[j], widen<T, Acc>(row[j]));
          }
        } else {
          int64_t o = 0;
          for (int64_t i = 0; i < n; ++i) {
            acc[o] = fold<R>(acc[o], widen<T, Acc>(px[i]));
            for (int d = rank - 1; d >= 0; --d) {
              o += ostride[d];
              if (++idx[d] < in[d]) break;
              o -= ostride[d] * in[d];
              idx[d] = 0;
            }
          }
        }
        Tensor& out = ctx.allocate_output(0, x.dtype(), out_shape);
        T* po = out.data<T>();
        for (int64_t i = 0; i < n_out; ++i) {
          Acc v = acc[i];
          if constexpr (R == Reduction::mean) v = count ? v / Acc(count) : Acc(0);
          po[i] = T(v);
        }
      }
    });
  }

 private:
  const Node& node_;
  bool keep_;
  std::optional<std::vector<int64_t>> axes_;  // axes_of(): read once, not at every firing
};

template <Reduction R>
void register_reduction(const char* name) {
  OpRegistry::global().add(OpDef{.name = name, .num_inputs = 1, .shape_fn = reduce_shape});
  KernelRegistry::global().add(name, DeviceType::cpu, [](const Node& n) {
    return std::unique_ptr<OpKernel>(new ReduceKernel<R>(n));
  });
}

const bool registered = [] {
  register_reduction<Reduction::sum>("Sum");
  register_reduction<Reduction::mean>("Mean");
  register_reduction<Reduction::max>("Max");
  return true;
}();

std::optional<std::vector<int64_t>> axes_of(const Node& n) { return axes_of(n.attrs, n.name); }

using Grads = std::vector<Output>;

const bool gradients_registered = [] {
  auto& r = GradientRegistry::global();
  r.add("Sum", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    return {ops::reduction_grad(s, g[0], input_of(s, n, 0), axes_of(n), false)};
  });
  r.add("Mean", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    return {ops::reduction_grad(s, g[0], input_of(s, n, 0), axes_of(n), true)};
  });
  // Max: the gradient is shared among the elements equal to the maximum.
  r.add("Max", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    auto x = input_of(s, n, 0), y = output_of(s, n);
    auto axes = axes_of(n);
    auto is_max = ops::cast(s, ops::equal(s, x, ops::reduction_grad(s, y, x, axes, false)), x.dtype());
    auto count = ops::reduction_grad(s, ops::sum(s, is_max, axes), x, axes, false);
    auto spread = ops::reduction_grad(s, g[0], x, axes, false);
    return {ops::div(s, ops::mul(s, spread, is_max), count)};
  });
  return true;
}();

Output reduce(const Scope& scope, const char* op, Output x,
              const std::optional<std::vector<int64_t>>& axes, bool keep_dims) {
  return &scope.add(op, {x},
                    {{"axes", axes.value_or(std::vector<int64_t>{})},
                     {"reduce_all", !axes.has_value()},
                     {"keep_dims", keep_dims}});
}

}  // namespace

namespace ops {
Output sum(const Scope& s, Output x, std::optional<std::vector<int64_t>> axes, bool keep) {
  return reduce(s, "Sum", x, axes, keep);
}
Output mean(const Scope& s, Output x, std::optional<std::vector<int64_t>> axes, bool keep) {
  return reduce(s, "Mean", x, axes, keep);
}
Output max(const Scope& s, Output x, std::optional<std::vector<int64_t>> axes, bool keep) {
  return reduce(s, "Max", x, axes, keep);
}
}  // namespace ops
}  // namespace troupe
