#include "ops/nn/lrn.hpp"

#include <cstdlib>
#include <optional>
#include <unordered_map>

#include "graph/gradients.hpp"
#include "ops/array/array.hpp"
#include "ops/array/shape_like.hpp"
#include "ops/basic.hpp"
#include "ops/kernel.hpp"
#include "ops/math/elementwise.hpp"
#include "ops/math/matmul.hpp"
#include "ops/nn/dnnl.hpp"

namespace troupe {
namespace {

using dnnl::memory;

struct LrnAttrs {
  int64_t radius;
  float bias, alpha, beta;
  explicit LrnAttrs(const AttrMap& a)
      : radius(get_attr_or<int64_t>(a, "depth_radius", 5)),
        bias(float(get_attr_or<double>(a, "bias", 1.0))),
        alpha(float(get_attr_or<double>(a, "alpha", 1.0))),
        beta(float(get_attr_or<double>(a, "beta", 0.5))) {}
  void check() const {
    if (radius < 0) fail(ErrorCode::invalid_argument, "depth_radius must be >= 0, got {}", radius);
    if (bias <= 0) fail(ErrorCode::invalid_argument, "bias must be > 0, got {}", bias);
  }
};

void lrn_shape(InferenceContext& c) {
  if (c.input_type(0) != DType::float32) c.error("takes float32, got {}", name_of(c.input_type(0)));
  try {
    LrnAttrs(c.attrs()).check();
  } catch (const Error& e) {
    c.error("{}", e.what());
  }
  auto& in = c.input_shape(0);
  if (in.rank_known() && in.rank() != 4) c.error("input must be NCHW, got {}", in.to_string());
  c.set_output(0, DType::float32, in);
}

// The forward primitive; oneDNN scales alpha by the window size (alpha / n * sum), TensorFlow
// does not.
struct LrnPlan {
  memory::desc data;
  dnnl::lrn_forward::primitive_desc fwd;
  LrnPlan(const LrnAttrs& a, const Shape& in) {
    a.check();
    if (in.rank() != 4) fail(ErrorCode::invalid_argument, "input must be NCHW, got {}", in.to_string());
    data = memory::desc(dnnl_cpu::dims(in), memory::data_type::f32, memory::format_tag::nchw);
    fwd = dnnl::lrn_forward::primitive_desc(desc(a, dnnl::prop_kind::forward_training), dnnl_cpu::attrs(),
                                            dnnl_cpu::engine());
    if (fwd.workspace_desc().get_size() > 0) workspace = memory(fwd.workspace_desc(), dnnl_cpu::engine());
  }
  dnnl::lrn_forward::desc desc(const LrnAttrs& a, dnnl::prop_kind kind) const {
    const int64_t n = 2 * a.radius + 1;
    return {kind, dnnl::algorithm::lrn_across_channels, data, n, a.alpha * float(n), a.beta, a.bias};
  }
  dnnl::lrn_backward::desc backward(const LrnAttrs& a) const {
    const int64_t n = 2 * a.radius + 1;
    return {dnnl::algorithm::lrn_across_channels, data, data, n, a.alpha * float(n), a.beta, a.bias};
  }
  // Runs the forward into `out`, filling the workspace the backward needs when the primitive
  // has one.
  void forward(const dnnl::lrn_forward& prim, const Tensor& in, const Tensor& out) const {
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, dnnl_cpu::wrap(in, data)},
                                         {DNNL_ARG_DST, dnnl_cpu::wrap(out, data)}};
    if (workspace) args.emplace(DNNL_ARG_WORKSPACE, workspace);
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl_cpu::scratchpad(fwd.scratchpad_desc()));
    prim.execute(dnnl_cpu::stream(), args);
  }
  memory workspace;  // empty when the primitive needs none; kept for later steps
};

class LrnKernel final : public OpKernel {
 public:
  explicit LrnKernel(const Node& n) : attrs_(n.attrs) {}
  bool runs_team() const override { return true; }
  void compute(KernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    if (!key_.matches({&in})) {
      plan_.emplace(attrs_, in.shape());
      prim_ = dnnl::lrn_forward(plan_->fwd);
      key_.set({&in});
    }
    plan_->forward(prim_, in, ctx.allocate_output(0, DType::float32, in.shape()));
    dnnl_cpu::stream().wait();
  }

 private:
  LrnAttrs attrs_;
  dnnl_cpu::ShapeKey key_;
  std::optional<LrnPlan> plan_;
  dnnl::lrn_forward prim_;
};

// LRNGrad(input, grad): d loss / d input. Like MaxPoolGrad, it recomputes the forward for the
// workspace rather than carrying an opaque tensor through the graph.
class LrnGradKernel final : public OpKernel {
 public:
  explicit LrnGradKernel(const Node& n) : attrs_(n.attrs) {}
  bool runs_team() const override { return true; }
  void compute(KernelContext& ctx) override {
    const Tensor& in = ctx.input(0);
    const Tensor& g = ctx.input(1);
    if (!key_.matches({&in, &g})) {
      if (g.shape() != in.shape())
        fail(ErrorCode::invalid_argument, "gradient {} does not match the input {}", g.describe(), in.describe());
      plan_.emplace(attrs_, in.shape());
      bwd_pd_ = dnnl::lrn_backward::primitive_desc(plan_->backward(attrs_), dnnl_cpu::attrs(), dnnl_cpu::engine(),
                                                   plan_->fwd);
      fwd_ = dnnl::lrn_forward(plan_->fwd);
      bwd_ = dnnl::lrn_backward(bwd_pd_);
      key_.set({&in, &g});
    }
    Tensor y(DType::float32, in.shape());
    plan_->forward(fwd_, in, y);
    Tensor& dx = ctx.allocate_output(0, DType::float32, in.shape());
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, dnnl_cpu::wrap(in, plan_->data)},
                                         {DNNL_ARG_DIFF_DST, dnnl_cpu::wrap(g, plan_->data)},
                                         {DNNL_ARG_DIFF_SRC, dnnl_cpu::wrap(dx, plan_->data)}};
    if (plan_->workspace) args.emplace(DNNL_ARG_WORKSPACE, plan_->workspace);
    args.emplace(DNNL_ARG_SCRATCHPAD, dnnl_cpu::scratchpad(bwd_pd_.scratchpad_desc()));
    bwd_.execute(dnnl_cpu::stream(), args);
    dnnl_cpu::stream().wait();
  }

 private:
  LrnAttrs attrs_;
  dnnl_cpu::ShapeKey key_;
  std::optional<LrnPlan> plan_;
  dnnl::lrn_backward::primitive_desc bwd_pd_;
  dnnl::lrn_forward fwd_;
  dnnl::lrn_backward bwd_;
};

TROUPE_REGISTER_OP(OpDef{.name = "LRN", .num_inputs = 1, .shape_fn = lrn_shape});
TROUPE_REGISTER_OP(OpDef{.name = "LRNGrad", .num_inputs = 2,
                         .shape_fn = [](InferenceContext& c) { c.set_output(0, DType::float32, c.input_shape(0)); }});
TROUPE_REGISTER_KERNEL("LRN", DeviceType::cpu, LrnKernel);
TROUPE_REGISTER_KERNEL("LRNGrad", DeviceType::cpu, LrnGradKernel);
TROUPE_REGISTER_GRADIENT("LRN", [](const Scope& s, const Node& n, const std::vector<Output>& g) {
  return std::vector<Output>{Output(&s.add("LRNGrad", {input_of(s, n, 0), g[0]}, n.attrs))};
});

// LRNGrad's gradient, for second derivatives. LRN is written again with differentiable ops
// (the window sum across channels as a product with a band matrix, on [N*H*W, C]); LRNGrad(x,
// g) is then that expression's gradient for g, and its own gradient the gradient of that.
Output lrn_written_out(const Scope& s, Output x, const LrnAttrs& a) {
  const PartialShape& shape = x.shape();
  if (!shape.rank_known() || shape.rank() != 4 || shape.dim(1) < 0)
    fail(ErrorCode::unimplemented, "needs NCHW input with a known channel count, got {}", shape.to_string());
  const int64_t c = shape.dim(1);
  Tensor band(DType::float32, Shape{c, c});
  for (int64_t i = 0; i < c; ++i)
    for (int64_t j = 0; j < c; ++j) band.data<float>()[i * c + j] = std::abs(i - j) <= a.radius ? 1.0f : 0.0f;
  auto channels_last = ops::transpose(s, ops::square(s, x), {0, 2, 3, 1});
  auto window_sums = ops::matmul(s, ops::reshape(s, channels_last, {-1, c}), ops::constant(s, band));
  auto sums = ops::transpose(s, ops::reshape_like(s, window_sums, channels_last), {0, 3, 1, 2});
  auto base = ops::add(s, ops::constant(s, a.bias), ops::mul(s, ops::constant(s, a.alpha), sums));
  return ops::div(s, x, ops::pow(s, base, ops::constant(s, a.beta)));
}

TROUPE_REGISTER_GRADIENT("LRNGrad", [](const Scope& s, const Node& n, const std::vector<Output>& gg) {
  auto x = input_of(s, n, 0), g = input_of(s, n, 1);
  const LrnAttrs attrs(n.attrs);
  // stop_at_xs: x and g may depend on each other through the forward pass, which is the
  // outer gradients()'s to walk.
  auto dx = gradients(s, {lrn_written_out(s, x, attrs)}, {x}, {g}, {.stop_at_xs = true})[0];
  return gradients(s, {dx}, {x, g}, {gg[0]}, {.stop_at_xs = true});
});

}  // namespace

Output ops::lrn(const Scope& scope, Output input, LrnOptions o) {
  return &scope.add("LRN", {input},
                    {{"depth_radius", o.depth_radius}, {"bias", o.bias}, {"alpha", o.alpha}, {"beta", o.beta}});
}

}  // namespace troupe
