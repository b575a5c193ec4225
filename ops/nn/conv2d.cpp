#include "ops/nn/conv2d.hpp"

#include <type_traits>

#include "graph/gradients.hpp"
#include "ops/kernel.hpp"
#include "ops/nn/dnnl.hpp"

namespace troupe {

Window window(int64_t in, int64_t k, int64_t stride, int64_t dilation, const std::string& padding,
              int64_t explicit_before, int64_t explicit_after) {
  const int64_t span = (k - 1) * dilation + 1;
  Window w;
  if (padding == "SAME") {
    w.out = (in + stride - 1) / stride;
    int64_t total = std::max<int64_t>((w.out - 1) * stride + span - in, 0);
    w.pad_before = total / 2;
    w.pad_after = total - w.pad_before;
  } else {
    if (padding == "EXPLICIT") {
      w.pad_before = explicit_before;
      w.pad_after = explicit_after;
    } else if (padding != "VALID") {
      fail(ErrorCode::invalid_argument, "padding must be SAME, VALID or EXPLICIT, got '{}'", padding);
    }
    int64_t padded = in + w.pad_before + w.pad_after;
    w.out = padded >= span ? (padded - span) / stride + 1 : 0;
  }
  return w;
}

namespace {

using dnnl::memory;
using Tag = memory::format_tag;

struct ConvAttrs {
  std::vector<int64_t> strides, dilations, paddings;
  std::string padding;
  explicit ConvAttrs(const AttrMap& a) {
    strides = get_attr_or<std::vector<int64_t>>(a, "strides", {1, 1});
    dilations = get_attr_or<std::vector<int64_t>>(a, "dilations", {1, 1});
    paddings = get_attr_or<std::vector<int64_t>>(a, "explicit_paddings", {0, 0, 0, 0});
    padding = get_attr_or<std::string>(a, "padding", "SAME");
  }
  void check() const {
    auto positive = [](const std::vector<int64_t>& v) {
      return v.size() == 2 && v[0] > 0 && v[1] > 0;
    };
    if (!positive(strides)) fail(ErrorCode::invalid_argument, "strides must be two positive numbers");
    if (!positive(dilations)) fail(ErrorCode::invalid_argument, "dilations must be two positive numbers");
    if (paddings.size() != 4) fail(ErrorCode::invalid_argument, "explicit_paddings must have 4 entries");
  }
  // Output [N, O, OH, OW] and the paddings for input [N,C,H,W], filter [O,C,KH,KW].
  std::pair<Shape, std::array<Window, 2>> plan(const Shape& in, const Shape& f) const {
    Window h = window(in[2], f[2], strides[0], dilations[0], padding, paddings[0], paddings[1]);
    Window w = window(in[3], f[3], strides[1], dilations[1], padding, paddings[2], paddings[3]);
    return {Shape{in[0], f[0], h.out, w.out}, {h, w}};
  }
  memory::dims dnnl_strides() const { return {strides[0], strides[1]}; }
  memory::dims dnnl_dilations() const { return {dilations[0] - 1, dilations[1] - 1}; }
};

void check_conv_shapes(const Shape& in, const Shape& f, const std::string& what) {
  if (in.rank() != 4 || f.rank() != 4)
    fail(ErrorCode::invalid_argument, "{}: input and filter must have rank 4 (NCHW, OIHW), got {} and {}", what,
         in.to_string(), f.to_string());
  if (in[1] != f[1])
    fail(ErrorCode::invalid_argument, "{}: input has {} channels, filter expects {}: {} vs {}", what, in[1], f[1],
         in.to_string(), f.to_string());
}

TROUPE_REGISTER_OP(OpDef{
    .name = "Conv2D",
    .num_inputs = 2,
    .shape_fn = [](InferenceContext& c) {
      if (c.input_type(0) != DType::float32 || c.input_type(1) != DType::float32)
        c.error("takes float32, got {} and {}", name_of(c.input_type(0)), name_of(c.input_type(1)));
      ConvAttrs a(c.attrs());
      try {
        a.check();
      } catch (const Error& e) {
        c.error("{}", e.what());
      }
      auto& in = c.input_shape(0);
      auto& f = c.input_shape(1);
      if ((in.rank_known() && in.rank() != 4) || (f.rank_known() && f.rank() != 4))
        c.error("input and filter must have rank 4 (NCHW, OIHW), got {} and {}", in.to_string(), f.to_string());
      if (!in.rank_known() || !f.rank_known()) {
        c.set_output(0, DType::float32, PartialShape::of_rank(4));
        return;
      }
      if (in.dim(1) >= 0 && f.dim(1) >= 0 && in.dim(1) != f.dim(1))
        c.error("input has {} channels, filter expects {}: {} vs {}", in.dim(1), f.dim(1), in.to_string(), f.to_string());
      std::vector<int64_t> out = {in.dim(0), f.dim(0), -1, -1};
      for (int d = 0; d < 2; ++d)
        if (in.dim(2 + d) >= 0 && f.dim(2 + d) >= 0)
          out[2 + d] = window(in.dim(2 + d), f.dim(2 + d), a.strides[d], a.dilations[d], a.padding,
                              a.paddings[2 * d], a.paddings[2 * d + 1]).out;
      c.set_output(0, DType::float32, PartialShape::from_dims(out));
    }});

// The three convolution primitives share their descriptors. oneDNN chooses the layouts
// (format_tag::any: blocked layouts such as nChw16c, where its direct AVX-512 kernels run, far
// faster than the im2col GEMM it falls back to on plain NCHW); Layout bridges each plain
// tensor to the chosen layout. Each kernel keeps its primitive and bridges for the input shapes
// it last saw and rebuilds them only when those change.
class ConvKernelBase : public OpKernel {
 protected:
  explicit ConvKernelBase(const Node& n) : attrs_(n.attrs) {}
  struct Descs {
    memory::desc src, weights, dst;           // plain: nchw, oihw, nchw
    memory::desc any_src, any_weights, any_dst;
    memory::dims pad_l, pad_r;
    Shape out;
  };
  Descs descs(const Shape& in, const Shape& f) const {
    check_conv_shapes(in, f, "Conv2D");
    auto [out, win] = attrs_.plan(in, f);
    if (out[2] <= 0 || out[3] <= 0)
      fail(ErrorCode::invalid_argument, "the filter {} does not fit the input {}", f.to_string(), in.to_string());
    auto desc = [](const Shape& s, Tag tag) { return memory::desc(dnnl_cpu::dims(s), memory::data_type::f32, tag); };
    return {desc(in, Tag::nchw), desc(f, Tag::oihw), desc(out, Tag::nchw),
            desc(in, Tag::any),  desc(f, Tag::any),  desc(out, Tag::any),
            {win[0].pad_before, win[1].pad_before}, {win[0].pad_after, win[1].pad_after}, out};
  }
  dnnl::convolution_forward::primitive_desc forward_pd(const Descs& d) const {
    dnnl::convolution_forward::desc desc(dnnl::prop_kind::forward_training, dnnl::algorithm::convolution_direct,
                                         d.any_src, d.any_weights, d.any_dst, attrs_.dnnl_strides(),
                                         attrs_.dnnl_dilations(), d.pad_l, d.pad_r);
    return {desc, dnnl_cpu::attrs(), dnnl_cpu::engine()};
  }
  void check_gradient(const Descs& d, const Tensor& g) const {
    if (g.shape() != d.out)
      fail(ErrorCode::invalid_argument, "gradient {} does not match the convolution's output {}", g.describe(),
           d.out.to_string());
  }
  ConvAttrs attrs_;
  dnnl_cpu::ShapeKey key_;
};

class Conv2DKernel final : public ConvKernelBase {
 public:
  explicit Conv2DKernel(const Node& n) : ConvKernelBase(n) {}
  bool runs_team() const override { return true; }
  void compute(KernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const Tensor& f = ctx.input(1);
    if (!key_.matches({&in, &f})) {
      auto d = descs(in.shape(), f.shape());
      auto pd = forward_pd(d);
      prim_ = dnnl::convolution_forward(pd);
      src_ = dnnl_cpu::Layout(d.src, pd.src_desc());
      weights_ = dnnl_cpu::Layout(d.weights, pd.weights_desc());
      dst_ = dnnl_cpu::Layout(d.dst, pd.dst_desc());
      pad_ = pd.scratchpad_desc();
      out_shape_ = d.out;
      key_.set({&in, &f});
    }
    Tensor& out = ctx.allocate_output(0, DType::float32, out_shape_);
    dnnl_cpu::Borrowed borrowed{&src_, &weights_, &dst_};
    auto src = src_.in(in);
    auto weights = weights_.in(f);
    prim_.execute(dnnl_cpu::stream(), {{DNNL_ARG_SRC, src},
                                       {DNNL_ARG_WEIGHTS, weights},
                                       {DNNL_ARG_DST, dst_.out(out)},
                                       {DNNL_ARG_SCRATCHPAD, dnnl_cpu::scratchpad(pad_)}});
    dst_.finish(out);
    dnnl_cpu::stream().wait();
  }

 private:
  dnnl::convolution_forward prim_;
  dnnl_cpu::Layout src_, weights_, dst_;
  memory::desc pad_;
  Shape out_shape_;
};
TROUPE_REGISTER_KERNEL("Conv2D", DeviceType::cpu, Conv2DKernel);

// Conv2DBackpropInput(input, filter, grad): d loss / d input (input gives the shape only).
// Conv2DBackpropFilter(input, filter, grad): d loss / d filter (filter gives the shape only).
// kInput picks which; the other operand and the gradient are the primitive's inputs.
template <bool kInput>
class ConvBackpropKernel final : public ConvKernelBase {
  using Primitive =
      std::conditional_t<kInput, dnnl::convolution_backward_data, dnnl::convolution_backward_weights>;

 public:
  explicit ConvBackpropKernel(const Node& n) : ConvKernelBase(n) {}
  bool runs_team() const override { return true; }
  void compute(KernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const Tensor& f = ctx.input(1);
    const Tensor& g = ctx.input(2);
    if (!key_.matches({&in, &f, &g})) {
      auto d = descs(in.shape(), f.shape());
      check_gradient(d, g);
      typename Primitive::desc desc(dnnl::algorithm::convolution_direct, d.any_src, d.any_weights, d.any_dst,
                                    attrs_.dnnl_strides(), attrs_.dnnl_dilations(), d.pad_l, d.pad_r);
      typename Primitive::primitive_desc pd(desc, dnnl_cpu::attrs(), dnnl_cpu::engine(), forward_pd(d));
      prim_ = Primitive(pd);
      if constexpr (kInput) {
        operand_ = dnnl_cpu::Layout(d.weights, pd.weights_desc());
        result_ = dnnl_cpu::Layout(d.src, pd.diff_src_desc());
      } else {
        operand_ = dnnl_cpu::Layout(d.src, pd.src_desc());
        result_ = dnnl_cpu::Layout(d.weights, pd.diff_weights_desc());
      }
      diff_dst_ = dnnl_cpu::Layout(d.dst, pd.diff_dst_desc());
      pad_ = pd.scratchpad_desc();
      key_.set({&in, &f, &g});
    }
    Tensor& out = ctx.allocate_output(0, DType::float32, (kInput ? in : f).shape());
    dnnl_cpu::Borrowed borrowed{&operand_, &result_, &diff_dst_};
    auto operand = operand_.in(kInput ? f : in);
    auto diff_dst = diff_dst_.in(g);
    prim_.execute(dnnl_cpu::stream(), {{kInput ? DNNL_ARG_WEIGHTS : DNNL_ARG_SRC, operand},
                                       {DNNL_ARG_DIFF_DST, diff_dst},
                                       {kInput ? DNNL_ARG_DIFF_SRC : DNNL_ARG_DIFF_WEIGHTS, result_.out(out)},
                                       {DNNL_ARG_SCRATCHPAD, dnnl_cpu::scratchpad(pad_)}});
    result_.finish(out);
    dnnl_cpu::stream().wait();
  }

 private:
  Primitive prim_;
  dnnl_cpu::Layout operand_, result_, diff_dst_;
  memory::desc pad_;
};
TROUPE_REGISTER_KERNEL("Conv2DBackpropInput", DeviceType::cpu, ConvBackpropKernel<true>);
TROUPE_REGISTER_KERNEL("Conv2DBackpropFilter", DeviceType::cpu, ConvBackpropKernel<false>);

void like_input(InferenceContext& c, int which) { c.set_output(0, DType::float32, c.input_shape(which)); }
TROUPE_REGISTER_OP(OpDef{.name = "Conv2DBackpropInput", .num_inputs = 3,
                         .shape_fn = [](InferenceContext& c) { like_input(c, 0); }});
TROUPE_REGISTER_OP(OpDef{.name = "Conv2DBackpropFilter", .num_inputs = 3,
                         .shape_fn = [](InferenceContext& c) { like_input(c, 1); }});

TROUPE_REGISTER_GRADIENT("Conv2D", [](const Scope& s, const Node& n, const std::vector<Output>& g) {
  auto in = input_of(s, n, 0), f = input_of(s, n, 1);
  AttrMap attrs = n.attrs;
  return std::vector<Output>{Output(&s.add("Conv2DBackpropInput", {in, f, g[0]}, attrs)),
                             Output(&s.add("Conv2DBackpropFilter", {in, f, g[0]}, attrs))};
});

// The backprops, for second derivatives. Both are bilinear: BackpropInput(in, f, g) in (f, g),
// BackpropFilter(in, f, g) in (in, g); the remaining input gives only a shape. gg, the
// gradient reaching a backprop's output, has the shape of in (resp. f).
TROUPE_REGISTER_GRADIENT("Conv2DBackpropInput", [](const Scope& s, const Node& n, const std::vector<Output>& gg) {
  auto f = input_of(s, n, 1), g = input_of(s, n, 2);
  return std::vector<Output>{Output(), Output(&s.add("Conv2DBackpropFilter", {gg[0], f, g}, n.attrs)),
                             Output(&s.add("Conv2D", {gg[0], f}, n.attrs))};
});
TROUPE_REGISTER_GRADIENT("Conv2DBackpropFilter", [](const Scope& s, const Node& n, const std::vector<Output>& gg) {
  auto in = input_of(s, n, 0), g = input_of(s, n, 2);
  return std::vector<Output>{Output(&s.add("Conv2DBackpropInput", {in, gg[0], g}, n.attrs)), Output(),
                             Output(&s.add("Conv2D", {in, gg[0]}, n.attrs))};
});

}  // namespace

Output ops::conv2d(const Scope& scope, Output input, Output filter, Conv2DOptions o) {
  return &scope.add("Conv2D", {input, filter},
                    {{"strides", o.strides},
                     {"padding", o.padding},
                     {"explicit_paddings", o.explicit_paddings},
                     {"dilations", o.dilations}});
}

}  // namespace troupe
