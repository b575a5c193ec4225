#include "ops/array/array.hpp"

#include <cmath>
#include <cstring>
#include <limits>
#include <numeric>

#include "graph/gradients.hpp"
#include "ops/array/shape_like.hpp"
#include "ops/kernel.hpp"
#include "ops/math/reduce.hpp"

namespace troupe {
namespace {

// Resolves a requested shape with at most one -1 against a number of elements.
Shape resolve_reshape(const std::vector<int64_t>& requested, int64_t elements, const std::string& what) {
  int64_t known = 1;
  int unknown = -1;
  for (std::size_t i = 0; i < requested.size(); ++i) {
    if (requested[i] == -1) {
      if (unknown >= 0) fail(ErrorCode::invalid_argument, "{}: more than one -1 in the shape", what);
      unknown = int(i);
    } else if (requested[i] < 0) {
      fail(ErrorCode::invalid_argument, "{}: negative dimension {} in the shape", what, requested[i]);
    } else {
      known *= requested[i];
    }
  }
  std::vector<int64_t> dims = requested;
  if (unknown >= 0) {
    if (known == 0 || elements % known != 0)
      fail(ErrorCode::invalid_argument, "{}: cannot reshape {} elements to {}", what, elements,
           PartialShape::from_dims(requested).to_string());
    dims[unknown] = elements / known;
  } else if (known != elements) {
    fail(ErrorCode::invalid_argument, "{}: cannot reshape {} elements to {} ({} elements)", what,
         elements, Shape(dims).to_string(), known);
  }
  return Shape(dims);
}

TROUPE_REGISTER_OP(OpDef{
    .name = "Reshape",
    .num_inputs = 1,
    .shape_fn = [](InferenceContext& c) {
      auto& requested = c.attr<std::vector<int64_t>>("shape");
      int64_t elements = c.input_shape(0).num_elements();
      if (elements >= 0) {
        try {
          c.set_output(0, c.input_type(0), resolve_reshape(requested, elements, "Reshape"));
        } catch (const Error& e) {
          c.error("input {}: {}", c.input_shape(0).to_string(), e.what());
        }
      } else {
        c.set_output(0, c.input_type(0), PartialShape::from_dims(requested));
      }
    },
    .required_attrs = {"shape"}});

class ReshapeKernel final : public OpKernel {
 public:
  explicit ReshapeKernel(const Node& node)
      : shape_(get_attr<std::vector<int64_t>>(node.attrs, "shape", node.name)) {}
  void compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    ctx.set_output(0, x.reshaped(resolve_reshape(shape_, x.num_elements(), "input " + x.describe())));
  }

 private:
  std::vector<int64_t> shape_;
};
TROUPE_REGISTER_KERNEL("Reshape", DeviceType::cpu, ReshapeKernel);

std::vector<int64_t> resolve_perm(const std::vector<int64_t>& perm, int rank) {
  std::vector<int64_t> p = perm;
  if (p.empty()) {
    p.resize(rank);
    std::iota(p.rbegin(), p.rend(), 0);
  }
  if (int(p.size()) != rank)
    fail(ErrorCode::invalid_argument, "permutation has {} entries for a tensor of rank {}",
         p.size(), rank);
  std::vector<bool> seen(rank, false);
  for (auto d : p) {
    if (d < 0 || d >= rank || seen[d])
      fail(ErrorCode::invalid_argument, "{} is not a permutation of 0..{}",
           PartialShape::from_dims(perm).to_string(), rank - 1);
    seen[d] = true;
  }
  return p;
}

TROUPE_REGISTER_OP(OpDef{
    .name = "Transpose",
    .num_inputs = 1,
    .shape_fn = [](InferenceContext& c) {
      auto& in = c.input_shape(0);
      if (!in.rank_known()) {
        c.set_output(0, c.input_type(0), PartialShape::unknown());
        return;
      }
      std::vector<int64_t> perm;
      try {
        perm = resolve_perm(c.attr_or<std::vector<int64_t>>("perm", {}), in.rank());
      } catch (const Error& e) {
        c.error("{}", e.what());
      }
      std::vector<int64_t> dims;
      for (auto d : perm) dims.push_back(in.dim(int(d)));
      c.set_output(0, c.input_type(0), PartialShape::from_dims(dims));
    }});

class TransposeKernel final : public OpKernel {
 public:
  explicit TransposeKernel(const Node& node)
      : perm_(get_attr_or<std::vector<int64_t>>(node.attrs, "perm", {})) {}
  void compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Shape& in = x.shape();
    const int rank = in.rank();
    auto perm = resolve_perm(perm_, rank);
    Shape out_shape;
    for (auto d : perm) out_shape.push_back(in[int(d)]);
    Tensor& out = ctx.allocate_output(0, x.dtype(), out_shape);
    // Input stride of each output dimension; walk the output in order.
    std::array<int64_t, Shape::kMaxRank> in_stride{}, stride{}, idx{};
    int64_t s = 1;
    for (int d = rank - 1; d >= 0; --d) {
      in_stride[d] = s;
      s *= in[d];
    }
    for (int d = 0; d < rank; ++d) stride[d] = in_stride[perm[d]];
    const std::size_t elem = size_of(x.dtype());
    auto* src = static_cast<const unsigned char*>(x.raw_data());
    auto* dst = static_cast<unsigned char*>(out.raw_data());
    const int64_t n = x.num_elements();
    int64_t offset = 0;
    for (int64_t i = 0; i < n; ++i) {
      std::memcpy(dst + i * elem, src + offset * elem, elem);
      for (int d = rank - 1; d >= 0; --d) {
        offset += stride[d];
        if (++idx[d] < out_shape[d]) break;
        offset -= stride[d] * out_shape[d];
        idx[d] = 0;
      }
    }
  }

 private:
  std::vector<int64_t> perm_;
};
TROUPE_REGISTER_KERNEL("Transpose", DeviceType::cpu, TransposeKernel);

// A float to an integer type saturates: NaN becomes 0, values beyond the type's range its
// smallest or largest value (C++ leaves these conversions undefined; x86 turns them all into
// INT_MIN). The comparisons are exact: each limit either converts to From exactly or rounds
// up to a power of two that the next larger value would reach.
template <class To, class From>
To saturating_integer(From v) {
  using limits = std::numeric_limits<To>;
  if (std::isnan(v)) return To(0);
  if (v <= From(limits::lowest())) return limits::lowest();
  if (v >= From(limits::max())) return limits::max();
  return To(v);
}

// Integers to narrower integers wrap around (C++20); anything to bool is "is not zero".
template <class To, class From>
To convert(From v) {
  if constexpr (std::is_same_v<To, bool>) {
    if constexpr (std::is_same_v<From, half>) return float(v) != 0.0f;
    else return v != From(0);
  } else if constexpr (std::is_same_v<From, half>) {
    return convert<To>(float(v));
  } else if constexpr (std::is_integral_v<To> && std::is_floating_point_v<From>) {
    return saturating_integer<To>(v);
  } else if constexpr (std::is_same_v<To, half>) {
    return half(float(v));
  } else {
    return To(v);
  }
}

TROUPE_REGISTER_OP(OpDef{
    .name = "Cast",
    .num_inputs = 1,
    .shape_fn = [](InferenceContext& c) {
      c.set_output(0, c.attr<DType>("dtype"), c.input_shape(0));
    },
    .required_attrs = {"dtype"}});

class CastKernel final : public OpKernel {
 public:
  explicit CastKernel(const Node& node) : to_(get_attr<DType>(node.attrs, "dtype", node.name)) {}
  void compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    if (x.dtype() == to_) {
      ctx.set_output(0, x);
      return;
    }
    Tensor& out = ctx.allocate_output(0, to_, x.shape());
    const int64_t n = x.num_elements();
    visit_dtype(x.dtype(), [&](auto from) {
      using F = decltype(from);
      visit_dtype(to_, [&](auto to) {
        using T = decltype(to);
        const F* src = x.data<F>();
        T* dst = out.data<T>();
        for (int64_t i = 0; i < n; ++i) dst[i] = convert<T>(src[i]);
      });
    });
  }

 private:
  DType to_;
};
TROUPE_REGISTER_KERNEL("Cast", DeviceType::cpu, CastKernel);

void fill_with(Tensor& out, const Tensor& value) {
  const std::size_t elem = size_of(out.dtype());
  auto* dst = static_cast<unsigned char*>(out.raw_data());
  const int64_t n = out.num_elements();
  for (int64_t i = 0; i < n; ++i) std::memcpy(dst + i * elem, value.raw_data(), elem);
}

TROUPE_REGISTER_OP(OpDef{
    .name = "Fill",
    .num_inputs = 1,
    .shape_fn = [](InferenceContext& c) {
      auto& v = c.input_shape(0);
      if (v.rank_known() && v.rank() != 0) c.error("value must be a scalar, got {}", v.to_string());
      c.set_output(0, c.input_type(0), c.attr<PartialShape>("shape"));
    },
    .required_attrs = {"shape"}});

class FillKernel final : public OpKernel {
 public:
  explicit FillKernel(const Node& node)
      : shape_(get_attr<PartialShape>(node.attrs, "shape", node.name).to_shape()) {}
  void compute(KernelContext& ctx) override {
    const Tensor& v = ctx.input(0);
    if (v.shape().rank() != 0)
      fail(ErrorCode::invalid_argument, "value must be a scalar, got {}", v.describe());
    fill_with(ctx.allocate_output(0, v.dtype(), shape_), v);
  }

 private:
  Shape shape_;
};
TROUPE_REGISTER_KERNEL("Fill", DeviceType::cpu, FillKernel);

template <int kValue>
class ConstantLikeKernel final : public OpKernel {
 public:
  explicit ConstantLikeKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Tensor& out = ctx.allocate_output(0, x.dtype(), x.shape());
    visit_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      fill_with(out, Tensor::scalar<T>(convert<T>(kValue)));
    });
  }
};

TROUPE_REGISTER_OP(OpDef{.name = "ZerosLike", .num_inputs = 1, .shape_fn = shape_fns::unchanged});
TROUPE_REGISTER_OP(OpDef{.name = "OnesLike", .num_inputs = 1, .shape_fn = shape_fns::unchanged});
TROUPE_REGISTER_KERNEL("ZerosLike", DeviceType::cpu, ConstantLikeKernel<0>);
TROUPE_REGISTER_KERNEL("OnesLike", DeviceType::cpu, ConstantLikeKernel<1>);

using Grads = std::vector<Output>;

const bool gradients_registered = [] {
  auto& r = GradientRegistry::global();
  r.add("Reshape", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    return {ops::reshape_like(s, g[0], input_of(s, n, 0))};
  });
  r.add("Transpose", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    auto perm = get_attr_or<std::vector<int64_t>>(n.attrs, "perm", {});
    std::vector<int64_t> inverse(perm.size());
    for (std::size_t i = 0; i < perm.size(); ++i) inverse[std::size_t(perm[i])] = int64_t(i);
    return {ops::transpose(s, g[0], inverse)};  // empty perm (reversal) is its own inverse
  });
  r.add("Cast", [](const Scope& s, const Node& n, const Grads& g) -> Grads {
    auto x = input_of(s, n, 0);
    if (!is_floating(x.dtype()) || !is_floating(n.output_types[0])) return {Output()};
    return {ops::cast(s, g[0], x.dtype())};
  });
  r.add("Fill", [](const Scope& s, const Node&, const Grads& g) -> Grads { return {ops::sum(s, g[0])}; });
  r.add_none("ZerosLike");
  r.add_none("OnesLike");
  return true;
}();

}  // namespace

namespace ops {

Output reshape(const Scope& scope, Output x, std::vector<int64_t> shape) {
  return &scope.add("Reshape", {x}, {{"shape", std::move(shape)}});
}
Output transpose(const Scope& scope, Output x, std::vector<int64_t> perm) {
  return &scope.add("Transpose", {x}, {{"perm", std::move(perm)}});
}
Output cast(const Scope& scope, Output x, DType dtype) {
  return &scope.add("Cast", {x}, {{"dtype", dtype}});
}
Output fill(const Scope& scope, Shape shape, Output value) {
  return &scope.add("Fill", {value}, {{"shape", PartialShape(shape)}});
}
Output zeros_like(const Scope& scope, Output x) { return &scope.add("ZerosLike", {x}); }
Output ones_like(const Scope& scope, Output x) { return &scope.add("OnesLike", {x}); }

}  // namespace ops
}  // namespace troupe
