#include "ops/nn/bias_add.hpp"

#include "graph/gradients.hpp"
#include "ops/array/array.hpp"
#include "ops/kernel.hpp"

namespace troupe {
namespace {

int channel_axis(const std::string& format, int rank) { return format == "NHWC" ? rank - 1 : 1; }

void check_format(InferenceContext& c) {
  auto& f = c.attr<std::string>("data_format");
  if (f != "NCHW" && f != "NHWC") c.error("data_format must be NCHW or NHWC, got '{}'", f);
}

TROUPE_REGISTER_OP(OpDef{
    .name = "BiasAdd",
    .num_inputs = 2,
    .shape_fn = [](InferenceContext& c) {
      check_format(c);
      DType t = c.same_input_types();
      if (!is_floating(t)) c.error("takes a floating type, got {}", name_of(t));
      auto& x = c.input_shape(0);
      auto& b = c.input_shape(1);
      if (b.rank_known() && b.rank() != 1) c.error("bias must be a vector, got {}", b.to_string());
      if (x.rank_known()) {
        if (x.rank() < 2) c.error("input must have rank >= 2, got {}", x.to_string());
        int axis = channel_axis(c.attr<std::string>("data_format"), x.rank());
        if (b.rank_known() && x.dim(axis) >= 0 && b.dim(0) >= 0 && x.dim(axis) != b.dim(0))
          c.error("input {} has {} channels, bias {} has {}", x.to_string(), x.dim(axis), b.to_string(), b.dim(0));
      }
      c.set_output(0, t, x);
    },
    .required_attrs = {"data_format"}});

TROUPE_REGISTER_OP(OpDef{
    .name = "BiasAddGrad",
    .num_inputs = 1,
    .shape_fn = [](InferenceContext& c) {
      check_format(c);
      auto& g = c.input_shape(0);
      int64_t channels = -1;
      if (g.rank_known()) channels = g.dim(channel_axis(c.attr<std::string>("data_format"), g.rank()));
      c.set_output(0, c.input_type(0), PartialShape{channels});
    },
    .required_attrs = {"data_format"}});

// x viewed as [outer, channels, inner].
struct Layout {
  int64_t outer = 1, channels = 1, inner = 1;
  Layout(const Shape& s, int axis) {
    for (int d = 0; d < s.rank(); ++d) {
      if (d < axis) outer *= s[d];
      else if (d == axis) channels = s[d];
      else inner *= s[d];
    }
  }
};

class BiasAddKernel final : public OpKernel {
 public:
  explicit BiasAddKernel(const Node& n) : format_(get_attr<std::string>(n.attrs, "data_format", n.name)) {}
  void compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (x.shape().rank() < 2) fail(ErrorCode::invalid_argument, "input must have rank >= 2, got {}", x.describe());
    Layout l(x.shape(), channel_axis(format_, x.shape().rank()));
    if (b.shape() != Shape{l.channels})
      fail(ErrorCode::invalid_argument, "input {} has {} channels, bias is {}", x.describe(), l.channels, b.describe());
    visit_float32_or_64(x, ctx.node().op.c_str(), [&](auto zero) {
      using T = decltype(zero);
      const T* px = x.data<T>();
      const T* pb = b.data<T>();
      T* py = ctx.allocate_output(0, x.dtype(), x.shape()).template data<T>();
      for (int64_t o = 0; o < l.outer; ++o)
        for (int64_t c = 0; c < l.channels; ++c) {
          const int64_t base = (o * l.channels + c) * l.inner;
          for (int64_t i = 0; i < l.inner; ++i) py[base + i] = px[base + i] + pb[c];
        }
    });
  }

 private:
  std::string format_;
};
TROUPE_REGISTER_KERNEL("BiasAdd", DeviceType::cpu, BiasAddKernel);

class BiasAddGradKernel final : public OpKernel {
 public:
  explicit BiasAddGradKernel(const Node& n) : format_(get_attr<std::string>(n.attrs, "data_format", n.name)) {}
  void compute(KernelContext& ctx) override {
    const Tensor& g = ctx.input(0);
    Layout l(g.shape(), channel_axis(format_, g.shape().rank()));
    visit_float32_or_64(g, ctx.node().op.c_str(), [&](auto zero) {
      using T = decltype(zero);
      const T* pg = g.data<T>();
      std::vector<double> acc(std::size_t(l.channels), 0.0);
      for (int64_t o = 0; o < l.outer; ++o)
        for (int64_t c = 0; c < l.channels; ++c) {
          const T* row = pg + (o * l.channels + c) * l.inner;
          double s = 0;
          for (int64_t i = 0; i < l.inner; ++i) s += row[i];
          acc[std::size_t(c)] += s;
        }
      T* pb = ctx.allocate_output(0, g.dtype(), Shape{l.channels}).template data<T>();
      for (int64_t c = 0; c < l.channels; ++c) pb[c] = T(acc[std::size_t(c)]);
    });
  }

 private:
  std::string format_;
};
TROUPE_REGISTER_KERNEL("BiasAddGrad", DeviceType::cpu, BiasAddGradKernel);

TROUPE_REGISTER_GRADIENT("BiasAdd", [](const Scope& s, const Node& n, const std::vector<Output>& g) {
  auto format = get_attr<std::string>(n.attrs, "data_format", n.name);
  return std::vector<Output>{g[0], Output(&s.add("BiasAddGrad", {g[0]}, {{"data_format", format}}))};
});

// BiasAddGrad sums over all but the channel axis; its gradient broadcasts back along it.
TROUPE_REGISTER_GRADIENT("BiasAddGrad", [](const Scope& s, const Node& n, const std::vector<Output>& g) {
  auto format = get_attr<std::string>(n.attrs, "data_format", n.name);
  auto backprop = input_of(s, n, 0);
  return std::vector<Output>{ops::bias_add(s, ops::zeros_like(s, backprop), g[0], format)};
});

}  // namespace

Output ops::bias_add(const Scope& scope, Output x, Output bias, const std::string& data_format) {
  return &scope.add("BiasAdd", {x, bias}, {{"data_format", data_format}});
}

}  // namespace troupe
