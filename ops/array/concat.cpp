#include "ops/array/concat.hpp"

#include <cstring>

#include "graph/gradients.hpp"
#include "ops/array/array.hpp"
#include "ops/kernel.hpp"

namespace troupe {
namespace {

int64_t resolve_axis(int64_t axis, int rank) {
  int64_t a = axis < 0 ? axis + rank : axis;
  if (a < 0 || a >= rank) fail(ErrorCode::invalid_argument, "axis {} is out of range for rank {}", axis, rank);
  return a;
}

// Shapes around `axis`: outer elements before it, inner bytes after it.
struct Around {
  int64_t outer = 1, inner = 1;
  Around(const Shape& s, int64_t axis) {
    for (int d = 0; d < s.rank(); ++d) {
      if (d < axis) outer *= s[d];
      if (d > axis) inner *= s[d];
    }
  }
};

TROUPE_REGISTER_OP(OpDef{
    .name = "Concat",
    .num_inputs = -1,
    .shape_fn = [](InferenceContext& c) {
      if (c.num_inputs() < 1) c.error("needs at least one input");
      DType t = c.same_input_types();
      int rank = -1;
      for (int i = 0; i < c.num_inputs(); ++i)
        if (c.input_shape(i).rank_known()) {
          if (rank >= 0 && c.input_shape(i).rank() != rank)
            c.error("inputs differ in rank: {} and {}", c.input_shape(0).to_string(), c.input_shape(i).to_string());
          rank = c.input_shape(i).rank();
        }
      if (rank < 0) {
        c.set_output(0, t, PartialShape::unknown());
        return;
      }
      int64_t axis = 0;
      try {
        axis = resolve_axis(c.attr<int64_t>("axis"), rank);
      } catch (const Error& e) {
        c.error("{}", e.what());
      }
      std::vector<int64_t> dims(std::size_t(rank), -1);
      int64_t total = 0;
      for (int i = 0; i < c.num_inputs(); ++i) {
        auto& s = c.input_shape(i);
        if (!s.rank_known()) {
          total = -1;
          continue;
        }
        for (int d = 0; d < rank; ++d) {
          if (d == axis) continue;
          if (dims[d] >= 0 && s.dim(d) >= 0 && dims[d] != s.dim(d))
            c.error("input {} has shape {}, which differs from the others outside axis {}", i, s.to_string(), axis);
          if (dims[d] < 0) dims[d] = s.dim(d);
        }
        total = (total < 0 || s.dim(int(axis)) < 0) ? -1 : total + s.dim(int(axis));
      }
      dims[std::size_t(axis)] = total;
      c.set_output(0, t, PartialShape::from_dims(dims));
    },
    .required_attrs = {"axis"}});

class ConcatKernel final : public OpKernel {
 public:
  explicit ConcatKernel(const Node& n) : axis_(get_attr<int64_t>(n.attrs, "axis", n.name)) {}
  void compute(KernelContext& ctx) override {
    const Shape& first = ctx.input(0).shape();
    int64_t axis = resolve_axis(axis_, first.rank());
    Shape out = first;
    int64_t total = 0;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Shape& s = ctx.input(i).shape();
      bool fits = s.rank() == first.rank() && ctx.input(i).dtype() == ctx.input(0).dtype();
      for (int d = 0; fits && d < s.rank(); ++d) fits = d == axis || s[d] == first[d];
      if (!fits)
        fail(ErrorCode::invalid_argument, "input {} is {}, which does not concatenate with {} along axis {}", i,
             ctx.input(i).describe(), ctx.input(0).describe(), axis);
      total += s[int(axis)];
    }
    out.set_dim(int(axis), total);
    Tensor& y = ctx.allocate_output(0, ctx.input(0).dtype(), out);
    const std::size_t elem = size_of(y.dtype());
    Around around(out, axis);
    auto* dst = static_cast<unsigned char*>(y.raw_data());
    const std::size_t out_row = std::size_t(total * around.inner) * elem;
    std::size_t offset = 0;
    for (int i = 0; i < ctx.num_inputs(); ++i) {
      const Tensor& x = ctx.input(i);
      const std::size_t row = std::size_t(x.shape()[int(axis)] * around.inner) * elem;
      auto* src = static_cast<const unsigned char*>(x.num_elements() ? x.raw_data() : nullptr);
      for (int64_t o = 0; o < around.outer; ++o) std::memcpy(dst + o * out_row + offset, src + o * row, row);
      offset += row;
    }
  }

 private:
  int64_t axis_;
};
TROUPE_REGISTER_KERNEL("Concat", DeviceType::cpu, ConcatKernel);

// ConcatGradPart(g, x_0, ..., x_{n-1}): the part of g that came from x_index.
TROUPE_REGISTER_OP(OpDef{
    .name = "ConcatGradPart",
    .num_inputs = -1,
    .shape_fn = [](InferenceContext& c) {
      int64_t index = c.attr<int64_t>("index");
      if (index < 0 || index + 1 >= c.num_inputs()) c.error("index {} names no input", index);
      c.set_output(0, c.input_type(0), c.input_shape(int(index) + 1));
    },
    .required_attrs = {"axis", "index"}});

class ConcatGradPartKernel final : public OpKernel {
 public:
  explicit ConcatGradPartKernel(const Node& n)
      : axis_(get_attr<int64_t>(n.attrs, "axis", n.name)), index_(get_attr<int64_t>(n.attrs, "index", n.name)) {}
  void compute(KernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    int64_t axis = resolve_axis(axis_, g.shape().rank());
    int64_t begin = 0;
    for (int64_t i = 0; i < index_; ++i) begin += ctx.input(int(i) + 1).shape()[int(axis)];
    const Shape& part = ctx.input(int(index_) + 1).shape();
    Tensor& y = ctx.allocate_output(0, g.dtype(), part);
    const std::size_t elem = size_of(g.dtype());
    Around around(part, axis);
    const std::size_t in_row = std::size_t(g.shape()[int(axis)] * around.inner) * elem;
    const std::size_t out_row = std::size_t(part[int(axis)] * around.inner) * elem;
    const std::size_t skip = std::size_t(begin * around.inner) * elem;
    auto* src = static_cast<const unsigned char*>(g.raw_data());
    auto* dst = static_cast<unsigned char*>(y.raw_data());
    for (int64_t o = 0; o < around.outer; ++o) std::memcpy(dst + o * out_row, src + o * in_row + skip, out_row);
  }

 private:
  int64_t axis_, index_;
};
TROUPE_REGISTER_KERNEL("ConcatGradPart", DeviceType::cpu, ConcatGradPartKernel);

TROUPE_REGISTER_GRADIENT("Concat", [](const Scope& s, const Node& n, const std::vector<Output>& g) {
  std::vector<Output> inputs{g[0]};
  for (int i = 0; i < int(n.inputs.size()); ++i) inputs.push_back(input_of(s, n, i));
  std::vector<Output> out;
  for (int i = 0; i < int(n.inputs.size()); ++i)
    out.push_back(&s.add("ConcatGradPart", inputs, {{"axis", n.attrs.at("axis")}, {"index", int64_t(i)}}));
  return out;
});

// ConcatGradPart's gradient, for second derivatives: gg in its slot of g, zeros in the others
// (the x_i give only shapes).
TROUPE_REGISTER_GRADIENT("ConcatGradPart", [](const Scope& s, const Node& n, const std::vector<Output>& gg) {
  const int64_t index = get_attr<int64_t>(n.attrs, "index", n.name);
  std::vector<Output> parts;
  for (int i = 1; i < int(n.inputs.size()); ++i)
    parts.push_back(i - 1 == index ? gg[0] : ops::zeros_like(s, input_of(s, n, i)));
  std::vector<Output> out(n.inputs.size());
  out[0] = Output(&s.add("Concat", parts, {{"axis", n.attrs.at("axis")}}));
  return out;
});

TROUPE_REGISTER_OP(OpDef{
    .name = "Split",
    .num_inputs = 1,
    .num_outputs = -1,
    .num_outputs_fn = [](const AttrMap& a) { return int(std::get<int64_t>(a.at("num_split"))); },
    .shape_fn = [](InferenceContext& c) {
      int64_t parts = c.attr<int64_t>("num_split");
      if (parts < 1) c.error("num_split must be at least 1, got {}", parts);
      auto& in = c.input_shape(0);
      PartialShape piece = in;
      if (in.rank_known()) {
        int64_t axis = 0;
        try {
          axis = resolve_axis(c.attr<int64_t>("axis"), in.rank());
        } catch (const Error& e) {
          c.error("{}", e.what());
        }
        auto dims = in.dims();
        if (c.has_attr("sizes")) {
          const auto& sizes = c.attr<std::vector<int64_t>>("sizes");
          int64_t total = 0;
          for (int64_t size : sizes) total += size;
          if (int64_t(sizes.size()) != parts || (total != dims[axis] && dims[axis] >= 0))
            c.error("sizes [{}] do not split dimension {} of {} into {} parts", fmt::join(sizes, ","), axis,
                    in.to_string(), parts);
          for (int64_t i = 0; i < parts; ++i) {
            dims[axis] = sizes[i];
            c.set_output(int(i), c.input_type(0), PartialShape::from_dims(dims));
          }
          return;
        }
        if (dims[axis] >= 0) {
          if (dims[axis] % parts) c.error("dimension {} of {} does not split into {} parts", axis, in.to_string(), parts);
          dims[axis] /= parts;
        }
        piece = PartialShape::from_dims(dims);
      }
      for (int64_t i = 0; i < parts; ++i) c.set_output(int(i), c.input_type(0), piece);
    },
    .required_attrs = {"axis", "num_split"}});

class SplitKernel final : public OpKernel {
 public:
  explicit SplitKernel(const Node& n)
      : axis_(get_attr<int64_t>(n.attrs, "axis", n.name)),
        parts_(get_attr<int64_t>(n.attrs, "num_split", n.name)),
        sizes_(get_attr_or<std::vector<int64_t>>(n.attrs, "sizes", {})) {}
  void compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    int64_t axis = resolve_axis(axis_, x.shape().rank());
    int64_t n = x.shape()[int(axis)];
    std::vector<int64_t> sizes = sizes_;
    if (sizes.empty()) {
      if (n % parts_) fail(ErrorCode::invalid_argument, "dimension {} of {} does not split into {} parts", axis, x.describe(), parts_);
      sizes.assign(std::size_t(parts_), n / parts_);
    }
    int64_t total = 0;
    for (int64_t size : sizes) total += size;
    if (total != n)
      fail(ErrorCode::invalid_argument, "sizes [{}] do not split dimension {} of {}", fmt::join(sizes, ","), axis, x.describe());
    const std::size_t elem = size_of(x.dtype());
    Around around(x.shape(), axis);
    const std::size_t in_row = std::size_t(n * around.inner) * elem;
    auto* src = static_cast<const unsigned char*>(x.raw_data());
    std::size_t offset = 0;
    for (int64_t p = 0; p < parts_; ++p) {
      Shape piece = x.shape();
      piece.set_dim(int(axis), sizes[p]);
      const std::size_t out_row = std::size_t(sizes[p] * around.inner) * elem;
      auto* dst = static_cast<unsigned char*>(ctx.allocate_output(int(p), x.dtype(), piece).raw_data());
      for (int64_t o = 0; o < around.outer; ++o) std::memcpy(dst + o * out_row, src + o * in_row + offset, out_row);
      offset += out_row;
    }
  }

 private:
  int64_t axis_, parts_;
  std::vector<int64_t> sizes_;
};
TROUPE_REGISTER_KERNEL("Split", DeviceType::cpu, SplitKernel);

TROUPE_REGISTER_GRADIENT("Split", [](const Scope& s, const Node& n, const std::vector<Output>& g) {
  return std::vector<Output>{Output(&s.add("Concat", g, {{"axis", n.attrs.at("axis")}}))};
});

std::vector<Output> split_node(Node& n) {
  std::vector<Output> out;
  for (int i = 0; i < n.num_outputs(); ++i) out.push_back(Output(&n, i));
  return out;
}

}  // namespace

namespace ops {

Output concat(const Scope& scope, const std::vector<Output>& inputs, int64_t axis) {
  return &scope.add("Concat", inputs, {{"axis", axis}});
}

std::vector<Output> split(const Scope& scope, Output x, int64_t axis, int64_t num_split) {
  return split_node(scope.add("Split", {x}, {{"axis", axis}, {"num_split", num_split}}));
}

std::vector<Output> split(const Scope& scope, Output x, int64_t axis, std::vector<int64_t> sizes) {
  TROUPE_CHECK_ARG(!sizes.empty(), "split: no sizes given for '{}'", x.name());
  const auto parts = int64_t(sizes.size());
  return split_node(scope.add("Split", {x}, {{"axis", axis}, {"num_split", parts}, {"sizes", std::move(sizes)}}));
}

}  // namespace ops
}  // namespace troupe
