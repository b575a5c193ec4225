#include "ops/nn/pool.hpp"

#include "graph/gradients.hpp"
#include "ops/kernel.hpp"
#include "ops/nn/conv2d.hpp"
#include <algorithm>
#include <optional>
#include <unordered_map>

#include "ops/nn/dnnl.hpp"

namespace troupe {
namespace {

using dnnl::memory;

struct PoolAttrs {
  std::vector<int64_t> ksize, strides, paddings;
  std::string padding;
  bool count_include_pad;
  explicit PoolAttrs(const AttrMap& a)
      : ksize(get_attr_or<std::vector<int64_t>>(a, "ksize", {2, 2})),
        strides(get_attr_or<std::vector<int64_t>>(a, "strides", {2, 2})),
        paddings(get_attr_or<std::vector<int64_t>>(a, "explicit_paddings", {0, 0, 0, 0})),
        padding(get_attr_or<std::string>(a, "padding", "VALID")),
        count_include_pad(get_attr_or<bool>(a, "count_include_pad", false)) {}
  void check() const {
    if (ksize.size() != 2 || strides.size() != 2 || ksize[0] < 1 || ksize[1] < 1 || strides[0] < 1 || strides[1] < 1)
      fail(ErrorCode::invalid_argument, "ksize and strides must be two positive numbers each");
    if (padding != "SAME" && padding != "VALID" && padding != "EXPLICIT")
      fail(ErrorCode::invalid_argument, "padding must be SAME, VALID or EXPLICIT, got '{}'", padding);
    if (padding != "EXPLICIT") return;
    if (paddings.size() != 4) fail(ErrorCode::invalid_argument, "explicit_paddings must have 4 entries");
    for (int i = 0; i < 4; ++i)
      if (paddings[i] < 0 || paddings[i] >= ksize[i / 2])
        fail(ErrorCode::invalid_argument,
             "explicit_paddings [{},{},{},{}] must be >= 0 and smaller than the window {}x{} along their dimension",
             paddings[0], paddings[1], paddings[2], paddings[3], ksize[0], ksize[1]);
  }
  Window window_of(int d, int64_t in) const {
    return window(in, ksize[d], strides[d], 1, padding, paddings[2 * d], paddings[2 * d + 1]);
  }
  std::array<Window, 2> windows(int64_t h, int64_t w) const { return {window_of(0, h), window_of(1, w)}; }
};

void pool_shape(InferenceContext& c) {
  if (c.input_type(0) != DType::float32) c.error("takes float32, got {}", name_of(c.input_type(0)));
  PoolAttrs a(c.attrs());
  try {
    a.check();
  } catch (const Error& e) {
    c.error("{}", e.what());
  }
  auto& in = c.input_shape(0);
  if (in.rank_known() && in.rank() != 4) c.error("input must be NCHW, got {}", in.to_string());
  if (!in.rank_known()) {
    c.set_output(0, DType::float32, PartialShape::of_rank(4));
    return;
  }
  std::vector<int64_t> out = {in.dim(0), in.dim(1), -1, -1};
  for (int d = 0; d < 2; ++d)
    if (in.dim(2 + d) >= 0) {
      out[2 + d] = a.window_of(d, in.dim(2 + d)).out;
      if (out[2 + d] <= 0) c.error("the window {}x{} does not fit the input {}", a.ksize[0], a.ksize[1], in.to_string());
    }
  c.set_output(0, DType::float32, PartialShape::from_dims(out));
}

// Pooling runs on the channel-blocked layout (blocked_nchw_desc), where oneDNN has JIT
// kernels; the plain tensors are bridged to it with Layout.
template <bool kMax>
struct PoolPlan {
  dnnl::pooling_forward::primitive_desc fwd;
  Shape out;
  memory::desc src, dst;              // plain nchw: the tensors
  memory::desc src_blocked, dst_blocked;  // what the primitives run on

  PoolPlan(const PoolAttrs& a, const Shape& in) {
    a.check();
    if (in.rank() != 4) fail(ErrorCode::invalid_argument, "input must be NCHW, got {}", in.to_string());
    auto win = a.windows(in[2], in[3]);
    if (win[0].out <= 0 || win[1].out <= 0)
      fail(ErrorCode::invalid_argument, "the window {}x{} does not fit the input {}", a.ksize[0], a.ksize[1], in.to_string());
    out = Shape{in[0], in[1], win[0].out, win[1].out};
    src = memory::desc(dnnl_cpu::dims(in), memory::data_type::f32, memory::format_tag::nchw);
    dst = memory::desc(dnnl_cpu::dims(out), memory::data_type::f32, memory::format_tag::nchw);
    src_blocked = dnnl_cpu::blocked_nchw_desc(in);
    dst_blocked = dnnl_cpu::blocked_nchw_desc(out);
    alg = algorithm(a);
    dnnl::pooling_forward::desc desc(dnnl::prop_kind::forward_training, alg, src_blocked, dst_blocked,
                                     {a.strides[0], a.strides[1]}, {a.ksize[0], a.ksize[1]},
                                     {win[0].pad_before, win[1].pad_before}, {win[0].pad_after, win[1].pad_after});
    fwd = dnnl::pooling_forward::primitive_desc(desc, dnnl_cpu::attrs(), dnnl_cpu::engine());
    // Training-mode max pooling writes where each maximum was, even when nobody reads it.
    if (kMax) workspace = memory(fwd.workspace_desc(), dnnl_cpu::engine());
    pad_l = {win[0].pad_before, win[1].pad_before};
    pad_r = {win[0].pad_after, win[1].pad_after};
    kernel = {a.ksize[0], a.ksize[1]};
    strides = {a.strides[0], a.strides[1]};
  }
  static dnnl::algorithm algorithm(const PoolAttrs& a) {
    if (kMax) return dnnl::algorithm::pooling_max;
    return a.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                               : dnnl::algorithm::pooling_avg_exclude_padding;
  }
  dnnl::algorithm alg;
  memory::dims pad_l, pad_r, kernel, strides;
  memory workspace;  // kept for later steps of the same shape
};

template <bool kMax>
class PoolKernel final : public OpKernel {
 public:
  explicit PoolKernel(const Node& n) : attrs_(n.attrs) {}
  bool runs_team() const override { return true; }
  void compute(KernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    if (!key_.matches({&in})) {
      plan_.emplace(attrs_, in.shape());
      prim_ = dnnl::pooling_forward(plan_->fwd);
      src_ = dnnl_cpu::Layout(plan_->src, plan_->src_blocked);
      dst_ = dnnl_cpu::Layout(plan_->dst, plan_->dst_blocked);
      key_.set({&in});
    }
    Tensor& out = ctx.allocate_output(0, DType::float32, plan_->out);
    dnnl_cpu::Borrowed borrowed{&src_, &dst_};
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src_.in(in)},
                                         {DNNL_ARG_DST, dst_.out(out)},
                                         {DNNL_ARG_SCRATCHPAD, dnnl_cpu::scratchpad(plan_->fwd.scratchpad_desc())}};
    if (kMax) args.emplace(DNNL_ARG_WORKSPACE, plan_->workspace);
    prim_.execute(dnnl_cpu::stream(), args);
    dst_.finish(out);
    dnnl_cpu::stream().wait();
  }

 private:
  PoolAttrs attrs_;
  dnnl_cpu::ShapeKey key_;
  std::optional<PoolPlan<kMax>> plan_;
  dnnl::pooling_forward prim_;
  dnnl_cpu::Layout src_, dst_;
};

// PoolGrad(input, grad): d loss / d input. Max pooling's backward needs the forward's
// workspace (where each maximum was); the kernel recomputes the forward to get it, which costs
// one more pooling pass but keeps the graph free of an opaque workspace tensor.
template <bool kMax>
class PoolGradKernel final : public OpKernel {
 public:
  explicit PoolGradKernel(const Node& n) : attrs_(n.attrs) {}
  bool runs_team() const override { return true; }
  void compute(KernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const Tensor& g = ctx.input(1);
    if (!key_.matches({&in, &g})) {
      plan_.emplace(attrs_, in.shape());
      if (g.shape() != plan_->out)
        fail(ErrorCode::invalid_argument, "gradient {} does not match the pooling's output {}", g.describe(),
             plan_->out.to_string());
      dnnl::pooling_backward::desc desc(plan_->alg, plan_->src_blocked, plan_->dst_blocked,
                                        plan_->strides, plan_->kernel, plan_->pad_l, plan_->pad_r);
      bwd_pd_ = dnnl::pooling_backward::primitive_desc(desc, dnnl_cpu::attrs(), dnnl_cpu::engine(), plan_->fwd);
      fwd_ = dnnl::pooling_forward(plan_->fwd);
      bwd_ = dnnl::pooling_backward(bwd_pd_);
      diff_dst_ = dnnl_cpu::Layout(plan_->dst, plan_->dst_blocked);
      diff_src_ = dnnl_cpu::Layout(plan_->src, plan_->src_blocked);
      if (kMax) {
        src_ = dnnl_cpu::Layout(plan_->src, plan_->src_blocked);
        forward_dst_ = memory(plan_->dst_blocked, dnnl_cpu::engine());
      }
      key_.set({&in, &g});
    }
    Tensor& dx = ctx.allocate_output(0, DType::float32, in.shape());
    dnnl_cpu::Borrowed borrowed{&src_, &diff_dst_, &diff_src_};
    if (kMax) {
      fwd_.execute(dnnl_cpu::stream(), {{DNNL_ARG_SRC, src_.in(in)},
                                        {DNNL_ARG_DST, forward_dst_},
                                        {DNNL_ARG_WORKSPACE, plan_->workspace},
                                        {DNNL_ARG_SCRATCHPAD, dnnl_cpu::scratchpad(plan_->fwd.scratchpad_desc())}});
    }
    std::unordered_map<int, memory> args{{DNNL_ARG_DIFF_DST, diff_dst_.in(g)}, {DNNL_ARG_DIFF_SRC, diff_src_.out(dx)}};
    if (kMax) args.emplace(DNNL_ARG_WORKSPACE, plan_->workspace);
    // After the forward: the scratchpad buffer is this thread's and may have been regrown.
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl_cpu::scratchpad(bwd_pd_.scratchpad_desc()));
    bwd_.execute(dnnl_cpu::stream(), args);
    diff_src_.finish(dx);
    dnnl_cpu::stream().wait();
  }

 private:
  PoolAttrs attrs_;
  dnnl_cpu::ShapeKey key_;
  std::optional<PoolPlan<kMax>> plan_;
  dnnl::pooling_backward::primitive_desc bwd_pd_;
  dnnl::pooling_forward fwd_;
  dnnl::pooling_backward bwd_;
  dnnl_cpu::Layout src_, diff_dst_, diff_src_;
  memory forward_dst_;  // the recomputed forward's output, unused but written
};

// MaxPoolGradGrad(input, grad_of_input): for each pooling window, the element of
// grad_of_input where the input has its maximum (the first in row-major order on ties, as
// oneDNN routes MaxPoolGrad's gradient). It is MaxPoolGrad's transpose in its gradient
// argument, so each is the other's gradient. Plain loops: it serves second derivatives only.
class MaxPoolGradGradKernel final : public OpKernel {
 public:
  explicit MaxPoolGradGradKernel(const Node& n) : attrs_(n.attrs) {}
  void compute(KernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const Tensor& gg = ctx.input(1);
    attrs_.check();
    if (in.shape().rank() != 4 || gg.shape() != in.shape() || in.dtype() != DType::float32 ||
        gg.dtype() != DType::float32)
      fail(ErrorCode::invalid_argument, "needs a float32 NCHW input and a gradient of its shape, got {} and {}",
           in.describe(), gg.describe());
    const Shape& s = in.shape();
    const int64_t planes = s[0] * s[1], h = s[2], w = s[3];
    auto win = attrs_.windows(h, w);
    Tensor& out = ctx.allocate_output(0, DType::float32, Shape{s[0], s[1], win[0].out, win[1].out});
    const float* px = in.data<float>();
    const float* pg = gg.data<float>();
    float* po = out.data<float>();
    for (int64_t p = 0; p < planes; ++p) {
      const float* x = px + p * h * w;
      const float* g = pg + p * h * w;
      for (int64_t oy = 0; oy < win[0].out; ++oy)
        for (int64_t ox = 0; ox < win[1].out; ++ox) {
          const int64_t y0 = oy * attrs_.strides[0] - win[0].pad_before;
          const int64_t x0 = ox * attrs_.strides[1] - win[1].pad_before;
          int64_t best = -1;
          for (int64_t y = std::max<int64_t>(y0, 0); y < std::min(y0 + attrs_.ksize[0], h); ++y)
            for (int64_t xx = std::max<int64_t>(x0, 0); xx < std::min(x0 + attrs_.ksize[1], w); ++xx)
              if (best < 0 || x[y * w + xx] > x[best]) best = y * w + xx;
          *po++ = best < 0 ? 0.0f : g[best];
        }
    }
  }

 private:
  PoolAttrs attrs_;
};

TROUPE_REGISTER_OP(OpDef{.name = "MaxPool", .num_inputs = 1, .shape_fn = pool_shape});
TROUPE_REGISTER_OP(OpDef{.name = "MaxPoolGradGrad", .num_inputs = 2, .shape_fn = pool_shape});
TROUPE_REGISTER_KERNEL("MaxPoolGradGrad", DeviceType::cpu, MaxPoolGradGradKernel);
TROUPE_REGISTER_OP(OpDef{.name = "AvgPool", .num_inputs = 1, .shape_fn = pool_shape});
TROUPE_REGISTER_OP(OpDef{.name = "MaxPoolGrad", .num_inputs = 2,
                         .shape_fn = [](InferenceContext& c) { c.set_output(0, DType::float32, c.input_shape(0)); }});
TROUPE_REGISTER_OP(OpDef{.name = "AvgPoolGrad", .num_inputs = 2,
                         .shape_fn = [](InferenceContext& c) { c.set_output(0, DType::float32, c.input_shape(0)); }});
TROUPE_REGISTER_KERNEL("MaxPool", DeviceType::cpu, PoolKernel<true>);
TROUPE_REGISTER_KERNEL("AvgPool", DeviceType::cpu, PoolKernel<false>);
TROUPE_REGISTER_KERNEL("MaxPoolGrad", DeviceType::cpu, PoolGradKernel<true>);
TROUPE_REGISTER_KERNEL("AvgPoolGrad", DeviceType::cpu, PoolGradKernel<false>);

GradientFunction pool_gradient(const char* grad_op) {
  return [grad_op](const Scope& s, const Node& n, const std::vector<Output>& g) {
    return std::vector<Output>{Output(&s.add(grad_op, {input_of(s, n, 0), g[0]}, n.attrs))};
  };
}
TROUPE_REGISTER_GRADIENT("MaxPool", pool_gradient("MaxPoolGrad"));
TROUPE_REGISTER_GRADIENT("AvgPool", pool_gradient("AvgPoolGrad"));
// The pooling backprops, for second derivatives. Both are linear in g; in gives AvgPoolGrad
// only a shape, and MaxPoolGrad the positions of the maxima, which move in steps (no
// gradient). AvgPoolGrad spreads g over the windows, the transpose of AvgPool, so its
// gradient pools again; MaxPoolGrad scatters g to the maxima, the transpose of gathering there.
TROUPE_REGISTER_GRADIENT("AvgPoolGrad", [](const Scope& s, const Node& n, const std::vector<Output>& gg) {
  return std::vector<Output>{Output(), Output(&s.add("AvgPool", {gg[0]}, n.attrs))};
});
TROUPE_REGISTER_GRADIENT("MaxPoolGrad", [](const Scope& s, const Node& n, const std::vector<Output>& gg) {
  return std::vector<Output>{Output(), Output(&s.add("MaxPoolGradGrad", {input_of(s, n, 0), gg[0]}, n.attrs))};
});
TROUPE_REGISTER_GRADIENT("MaxPoolGradGrad", [](const Scope& s, const Node& n, const std::vector<Output>& gg) {
  return std::vector<Output>{Output(), Output(&s.add("MaxPoolGrad", {input_of(s, n, 0), gg[0]}, n.attrs))};
});

Output pool(const Scope& scope, const char* op, Output input, const ops::PoolOptions& o) {
  AttrMap attrs{{"ksize", o.ksize}, {"strides", o.strides}, {"padding", o.padding}};
  if (o.padding == "EXPLICIT") attrs["explicit_paddings"] = o.explicit_paddings;
  if (o.count_include_pad) attrs["count_include_pad"] = true;
  return &scope.add(op, {input}, std::move(attrs));
}

}  // namespace

Output ops::max_pool(const Scope& scope, Output input, PoolOptions o) {
  TROUPE_CHECK_ARG(!o.count_include_pad, "max_pool takes no count_include_pad (it is avg_pool's)");
  return pool(scope, "MaxPool", input, o);
}
Output ops::avg_pool(const Scope& scope, Output input, PoolOptions o) { return pool(scope, "AvgPool", input, o); }

}  // namespace troupe
