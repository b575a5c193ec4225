#include "ops/nn/bias_add.hpp"

#include "graph/gradients.hpp"
#include "ops/array/array.hpp"
#include "ops/kernel.hpp"
#include "ops/math/float_loops.hpp"

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

// y = x + b along the channels: vectorized over the channels when each channel has one
// element per row (a Dense layer's [batch, units]), else over a channel's run of `inner`
// elements. Inlined into each clone of add_bias_float32, which so compiles it for its target.
template <class T>
[[gnu::always_inline]] inline void add_bias(const T* __restrict__ x, const T* __restrict__ b, T* __restrict__ y, const Layout& l) {
  if (l.inner == 1) {
    for (int64_t o = 0; o < l.outer; ++o) {
      const T* xr = x + o * l.channels;
      T* yr = y + o * l.channels;
      for (int64_t c = 0; c < l.channels; ++c) yr[c] = xr[c] + b[c];
    }
    return;
  }
  for (int64_t o = 0; o < l.outer; ++o)
    for (int64_t c = 0; c < l.channels; ++c) {
      const T bc = b[c];
      const int64_t base = (o * l.channels + c) * l.inner;
      for (int64_t i = 0; i < l.inner; ++i) y[base + i] = x[base + i] + bc;
    }
}

// The float32 loops, compiled for AVX2 besides the baseline as the elementwise kernels' are
// (ops/math/float_loops.hpp), for tensors of float_loops::kMinElements elements or more.
TROUPE_CLONES("arch=x86-64-v3", "default")
void add_bias_float32(const float* x, const float* b, float* y, const Layout& l) { add_bias(x, b, y, l); }

// g summed over all but the channels into acc (float64, zeroed): over the rows, vectorized
// over the channels, when each channel has one element per row; else a channel's runs summed
// over the rows first elementwise into `run` (inner float64s), vectorized over the run, and the
// run then summed once. (A channel's run summed on its own is a chain of dependent additions,
// one element at a time.)
TROUPE_CLONES("arch=x86-64-v3", "default")
void bias_grad_float32(const float* __restrict__ g, double* __restrict__ acc, double* __restrict__ run, int64_t outer,
                       int64_t channels, int64_t inner) {
  if (inner == 1) {
    for (int64_t o = 0; o < outer; ++o) {
      const float* gr = g + o * channels;
      for (int64_t c = 0; c < channels; ++c) acc[c] += double(gr[c]);
    }
    return;
  }
  for (int64_t c = 0; c < channels; ++c) {
    for (int64_t i = 0; i < inner; ++i) run[i] = 0;
    for (int64_t o = 0; o < outer; ++o) {
      const float* gr = g + (o * channels + c) * inner;
      for (int64_t i = 0; i < inner; ++i) run[i] += double(gr[i]);
    }
    double s = 0;
    for (int64_t i = 0; i < inner; ++i) s += run[i];
    acc[c] = s;
  }
}

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
      if constexpr (std::is_same_v<T, float>)
        if (x.num_elements() >= float_loops::kMinElements) return add_bias_float32(px, pb, py, l);
      add_bias(px, pb, py, l);
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
      bool summed = false;
      if constexpr (std::is_same_v<T, float>)
        if (g.num_elements() >= float_loops::kMinElements) {
          std::vector<double> run(std::size_t(l.inner > 1 ? l.inner : 0));
          bias_grad_float32(pg, acc.data(), run.data(), l.outer, l.channels, l.inner);
          summed = true;
        }
      if (!summed)
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
