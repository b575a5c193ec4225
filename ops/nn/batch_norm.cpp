#include "ops/nn/batch_norm.hpp"

#include <unordered_map>

#include "graph/gradients.hpp"
#include "ops/array/array.hpp"
#include "ops/basic.hpp"
#include "ops/kernel.hpp"
#include "ops/math/elementwise.hpp"
#include "ops/math/reduce.hpp"
#include "ops/nn/dnnl.hpp"

namespace troupe {
namespace {

using dnnl::memory;
using Flags = dnnl::normalization_flags;

void check_channels(InferenceContext& c, int first_vector, int count) {
  auto& x = c.input_shape(0);
  int64_t channels = x.rank_known() && x.rank() >= 2 ? x.dim(1) : -1;
  for (int i = first_vector; i < first_vector + count; ++i) {
    if (c.input_type(i) != DType::float32) c.error("input {} must be float32, got {}", i, name_of(c.input_type(i)));
    auto& v = c.input_shape(i);
    if (v.rank_known() && v.rank() != 1) c.error("input {} must be a vector [C], got {}", i, v.to_string());
    if (v.rank_known() && channels >= 0 && v.dim(0) >= 0 && v.dim(0) != channels)
      c.error("input {} is {}, but x {} has {} channels", i, v.to_string(), x.to_string(), channels);
  }
}

void check_x(InferenceContext& c, int i) {
  if (c.input_type(i) != DType::float32) c.error("x must be float32, got {}", name_of(c.input_type(i)));
  auto& x = c.input_shape(i);
  if (x.rank_known() && x.rank() != 2 && x.rank() != 4) c.error("x must be NCHW or [N, C], got {}", x.to_string());
}

int64_t channels_of(InferenceContext& c, int i) {
  auto& x = c.input_shape(i);
  return x.rank_known() ? x.dim(1) : -1;
}

TROUPE_REGISTER_OP(OpDef{
    .name = "FusedBatchNorm",
    .num_inputs = 5,
    .num_outputs = 3,
    .shape_fn = [](InferenceContext& c) {
      check_x(c, 0);
      check_channels(c, 1, 4);
      c.set_output(0, DType::float32, c.input_shape(0));
      c.set_output(1, DType::float32, PartialShape{channels_of(c, 0)});
      c.set_output(2, DType::float32, PartialShape{channels_of(c, 0)});
    }});

// FusedBatchNormGrad(dy, x, scale, mean, variance) -> dx, dscale, doffset.
TROUPE_REGISTER_OP(OpDef{
    .name = "FusedBatchNormGrad",
    .num_inputs = 5,
    .num_outputs = 3,
    .shape_fn = [](InferenceContext& c) {
      check_x(c, 1);
      c.set_output(0, DType::float32, c.input_shape(1));
      c.set_output(1, DType::float32, PartialShape{channels_of(c, 1)});
      c.set_output(2, DType::float32, PartialShape{channels_of(c, 1)});
    }});

struct BnAttrs {
  float epsilon;
  bool training;
  explicit BnAttrs(const AttrMap& a)
      : epsilon(float(get_attr_or<double>(a, "epsilon", 1e-3))), training(get_attr_or<bool>(a, "is_training", true)) {}
  Flags flags() const {
    Flags f = Flags::use_scale | Flags::use_shift;
    return training ? f : f | Flags::use_global_stats;
  }
};

void check_inputs(const Tensor& x, std::initializer_list<const Tensor*> vectors) {
  if (x.shape().rank() != 2 && x.shape().rank() != 4)
    fail(ErrorCode::invalid_argument, "x must be NCHW or [N, C], got {}", x.describe());
  const Shape c{x.shape()[1]};
  for (const Tensor* v : vectors)
    if (v->shape() != c)
      fail(ErrorCode::invalid_argument, "{} does not match the {} channels of x {}", v->describe(), c[0],
           x.describe());
}

memory::desc data_desc(const Shape& s) {
  return memory::desc(dnnl_cpu::dims(s), memory::data_type::f32,
                      s.rank() == 4 ? memory::format_tag::nchw : memory::format_tag::nc);
}

dnnl::batch_normalization_forward::primitive_desc forward_pd(const BnAttrs& a, const memory::desc& data) {
  auto kind = a.training ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
  return {{kind, data, a.epsilon, a.flags()}, dnnl_cpu::attrs(), dnnl_cpu::engine()};
}

int64_t per_channel_count(const Shape& s) { return s.num_elements() / s[1]; }

class BatchNormKernel final : public OpKernel {
 public:
  explicit BatchNormKernel(const Node& n) : attrs_(n.attrs) {}
  bool runs_team() const override { return true; }
  void compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Tensor &scale = ctx.input(1), &offset = ctx.input(2), &mean = ctx.input(3), &var = ctx.input(4);
    if (!key_.matches({&x, &scale, &offset, &mean, &var})) {
      check_inputs(x, {&scale, &offset, &mean, &var});
      data_ = data_desc(x.shape());
      pd_ = forward_pd(attrs_, data_);
      prim_ = dnnl::batch_normalization_forward(pd_);
      key_.set({&x, &scale, &offset, &mean, &var});
    }
    Tensor& y = ctx.allocate_output(0, DType::float32, x.shape());
    auto vec = memory::desc({x.shape()[1]}, memory::data_type::f32, memory::format_tag::a);
    Tensor batch_mean = attrs_.training ? Tensor(DType::float32, mean.shape()) : mean;
    Tensor batch_var = attrs_.training ? Tensor(DType::float32, var.shape()) : var;
    prim_.execute(dnnl_cpu::stream(), {{DNNL_ARG_SRC, dnnl_cpu::wrap(x, data_)},
                                       {DNNL_ARG_DST, dnnl_cpu::wrap(y, data_)},
                                       {DNNL_ARG_SCALE, dnnl_cpu::wrap(scale, vec)},
                                       {DNNL_ARG_SHIFT, dnnl_cpu::wrap(offset, vec)},
                                       {DNNL_ARG_MEAN, dnnl_cpu::wrap(batch_mean, vec)},
                                       {DNNL_ARG_VARIANCE, dnnl_cpu::wrap(batch_var, vec)},
                                       {DNNL_ARG_SCRATCHPAD, dnnl_cpu::scratchpad(pd_.scratchpad_desc())}});
    dnnl_cpu::stream().wait();
    if (attrs_.training) {  // oneDNN's variance divides by m; moving averages want m - 1
      const int64_t m = per_channel_count(x.shape());
      const float correction = m > 1 ? float(m) / float(m - 1) : 1.0f;
      for (int64_t c = 0; c < batch_var.num_elements(); ++c) batch_var.data<float>()[c] *= correction;
    }
    ctx.set_output(1, batch_mean);
    ctx.set_output(2, batch_var);
  }

 private:
  BnAttrs attrs_;
  dnnl_cpu::ShapeKey key_;
  memory::desc data_;
  dnnl::batch_normalization_forward::primitive_desc pd_;
  dnnl::batch_normalization_forward prim_;
};

// In training the statistics are the batch's, recomputed here from x by the forward primitive
// (one more pass over x) rather than carried from the forward node.
class BatchNormGradKernel final : public OpKernel {
 public:
  explicit BatchNormGradKernel(const Node& n) : attrs_(n.attrs) {}
  bool runs_team() const override { return true; }
  void compute(KernelContext& ctx) override {
    const Tensor &dy = ctx.input(0), &x = ctx.input(1), &scale = ctx.input(2), &mean = ctx.input(3),
                 &var = ctx.input(4);
    if (!key_.matches({&dy, &x, &scale, &mean, &var})) {
      check_inputs(x, {&scale, &mean, &var});
      if (dy.shape() != x.shape())
        fail(ErrorCode::invalid_argument, "gradient {} does not match x {}", dy.describe(), x.describe());
      data_ = data_desc(x.shape());
      fwd_pd_ = forward_pd(attrs_, data_);
      fwd_ = dnnl::batch_normalization_forward(fwd_pd_);
      bwd_pd_ = dnnl::batch_normalization_backward::primitive_desc(
          {dnnl::prop_kind::backward, data_, data_, attrs_.epsilon, attrs_.flags()}, dnnl_cpu::attrs(),
          dnnl_cpu::engine(), fwd_pd_);
      bwd_ = dnnl::batch_normalization_backward(bwd_pd_);
      zeros_ = Tensor::zeros(DType::float32, scale.shape());
      key_.set({&dy, &x, &scale, &mean, &var});
    }
    auto vec = memory::desc({x.shape()[1]}, memory::data_type::f32, memory::format_tag::a);
    Tensor stats_mean = mean, stats_var = var;
    if (attrs_.training) {
      stats_mean = Tensor(DType::float32, mean.shape());
      stats_var = Tensor(DType::float32, var.shape());
      Tensor y(DType::float32, x.shape());
      fwd_.execute(dnnl_cpu::stream(), {{DNNL_ARG_SRC, dnnl_cpu::wrap(x, data_)},
                                        {DNNL_ARG_DST, dnnl_cpu::wrap(y, data_)},
                                        {DNNL_ARG_SCALE, dnnl_cpu::wrap(scale, vec)},
                                        {DNNL_ARG_SHIFT, dnnl_cpu::wrap(zeros_, vec)},
                                        {DNNL_ARG_MEAN, dnnl_cpu::wrap(stats_mean, vec)},
                                        {DNNL_ARG_VARIANCE, dnnl_cpu::wrap(stats_var, vec)},
                                        {DNNL_ARG_SCRATCHPAD, dnnl_cpu::scratchpad(fwd_pd_.scratchpad_desc())}});
    }
    Tensor& dx = ctx.allocate_output(0, DType::float32, x.shape());
    Tensor& dscale = ctx.allocate_output(1, DType::float32, scale.shape());
    Tensor& doffset = ctx.allocate_output(2, DType::float32, scale.shape());
    bwd_.execute(dnnl_cpu::stream(), {{DNNL_ARG_SRC, dnnl_cpu::wrap(x, data_)},
                                      {DNNL_ARG_MEAN, dnnl_cpu::wrap(stats_mean, vec)},
                                      {DNNL_ARG_VARIANCE, dnnl_cpu::wrap(stats_var, vec)},
                                      {DNNL_ARG_DIFF_DST, dnnl_cpu::wrap(dy, data_)},
                                      {DNNL_ARG_SCALE, dnnl_cpu::wrap(scale, vec)},
                                      {DNNL_ARG_SHIFT, dnnl_cpu::wrap(zeros_, vec)},  // unread; 2.6 asks
                                      {DNNL_ARG_DIFF_SRC, dnnl_cpu::wrap(dx, data_)},
                                      {DNNL_ARG_DIFF_SCALE, dnnl_cpu::wrap(dscale, vec)},
                                      {DNNL_ARG_DIFF_SHIFT, dnnl_cpu::wrap(doffset, vec)},
                                      {DNNL_ARG_SCRATCHPAD, dnnl_cpu::scratchpad(bwd_pd_.scratchpad_desc())}});
    dnnl_cpu::stream().wait();
  }

 private:
  BnAttrs attrs_;
  dnnl_cpu::ShapeKey key_;
  memory::desc data_;
  dnnl::batch_normalization_forward::primitive_desc fwd_pd_;
  dnnl::batch_normalization_forward fwd_;
  dnnl::batch_normalization_backward::primitive_desc bwd_pd_;
  dnnl::batch_normalization_backward bwd_;
  Tensor zeros_;  // the forward's shift: the statistics do not depend on it
};

TROUPE_REGISTER_KERNEL("FusedBatchNorm", DeviceType::cpu, BatchNormKernel);
TROUPE_REGISTER_KERNEL("FusedBatchNormGrad", DeviceType::cpu, BatchNormGradKernel);

// Only y's gradient flows back; the statistics outputs feed moving averages, not the loss.
TROUPE_REGISTER_GRADIENT("FusedBatchNorm", [](const Scope& s, const Node& n, const std::vector<Output>& g) {
  Node& grad = s.add("FusedBatchNormGrad",
                     {g[0], input_of(s, n, 0), input_of(s, n, 1), input_of(s, n, 3), input_of(s, n, 4)}, n.attrs);
  return std::vector<Output>{Output(&grad, 0), Output(&grad, 1), Output(&grad, 2), Output(), Output()};
});

// FusedBatchNormGrad's gradient, for second derivatives: its outputs written again with
// differentiable ops, whose gradient gradients() then builds. Per channel, over the axes A
// (N, H, W), with x^ = (x - mean) / sqrt(variance + epsilon):
//   training (the batch's mean and biased variance; inputs 3 and 4 are not read):
//     dx = scale / sqrt(var + eps) * (dy - mean_A(dy) - x^ * mean_A(dy * x^))
//   inference (the given mean and variance): dx = dy * scale / sqrt(var + eps)
//   dscale = sum_A(dy * x^), doffset = sum_A(dy).
TROUPE_REGISTER_GRADIENT("FusedBatchNormGrad", [](const Scope& s, const Node& n, const std::vector<Output>& gg) {
  auto dy = input_of(s, n, 0), x = input_of(s, n, 1), scale = input_of(s, n, 2);
  auto given_mean = input_of(s, n, 3), given_var = input_of(s, n, 4);
  if (!x.shape().rank_known())
    fail(ErrorCode::unimplemented, "needs x of known rank (NCHW or [N, C]), got {}", x.shape().to_string());
  const bool nchw = x.shape().rank() == 4;
  const std::vector<int64_t> axes = nchw ? std::vector<int64_t>{0, 2, 3} : std::vector<int64_t>{0};
  auto per_channel = [&](Output v) { return ops::reshape(s, v, nchw ? std::vector<int64_t>{1, -1, 1, 1} : std::vector<int64_t>{1, -1}); };
  const BnAttrs attrs(n.attrs);
  Output mean, var;
  if (attrs.training) {
    mean = ops::mean(s, x, axes, true);
    var = ops::mean(s, ops::square(s, ops::sub(s, x, mean)), axes, true);
  } else {
    mean = per_channel(given_mean);
    var = per_channel(given_var);
  }
  auto inv_std = ops::div(s, ops::constant(s, 1.0f), ops::sqrt(s, ops::add(s, var, ops::constant(s, attrs.epsilon))));
  auto x_hat = ops::mul(s, ops::sub(s, x, mean), inv_std);
  auto gain = ops::mul(s, per_channel(scale), inv_std);
  Output dx = attrs.training
                  ? ops::mul(s, gain,
                             ops::sub(s, ops::sub(s, dy, ops::mean(s, dy, axes, true)),
                                      ops::mul(s, x_hat, ops::mean(s, ops::mul(s, dy, x_hat), axes, true))))
                  : ops::mul(s, dy, gain);
  auto dscale = ops::sum(s, ops::mul(s, dy, x_hat), axes);
  auto doffset = ops::sum(s, dy, axes);
  // stop_at_xs: dy itself depends on x through the forward pass; that path is the outer
  // gradients()'s to walk, not this one's. The given mean and variance get none, as in
  // FusedBatchNorm's own gradient.
  auto grads = gradients(s, {dx, dscale, doffset}, {dy, x, scale}, {gg[0], gg[1], gg[2]}, {.stop_at_xs = true});
  return std::vector<Output>{grads[0], grads[1], grads[2], Output(), Output()};
});

}  // namespace

ops::BatchNormOutputs ops::batch_norm(const Scope& scope, Output x, Output scale, Output offset, Output mean,
                                      Output variance, BatchNormOptions o) {
  Node& n = scope.add("FusedBatchNorm", {x, scale, offset, mean, variance},
                      {{"epsilon", o.epsilon}, {"is_training", o.is_training}});
  return {Output(&n, 0), Output(&n, 1), Output(&n, 2)};
}

}  // namespace troupe
