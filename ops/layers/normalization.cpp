#include "ops/layers/normalization.hpp"

#include "ops/all.hpp"

namespace troupe::layers {

Output BatchNormLayer::build(Context& ctx, Output x) {
  const Scope& s = ctx.scope();
  auto& in = x.shape();
  TROUPE_CHECK_ARG(in.rank_known() && (in.rank() == 2 || in.rank() == 4) && in.dim(1) >= 0,
                   "BatchNorm needs an NCHW or [N, C] input with known channels, got {}", in.to_string());
  TROUPE_CHECK_ARG(o_.momentum >= 0 && o_.momentum < 1, "BatchNorm needs 0 <= momentum < 1, got {}", o_.momentum);
  if (!gamma_) {
    Shape c{in.dim(1)};
    gamma_ = ctx.variable("gamma", c, ops::Initializer::constant(1));
    beta_ = ctx.variable("beta", c, ops::Initializer::zeros());
    moving_mean_ = ctx.variable("moving_mean", c, ops::Initializer::zeros(), false);
    moving_variance_ = ctx.variable("moving_variance", c, ops::Initializer::constant(1), false);
  }
  TROUPE_CHECK_ARG(gamma_.shape().dim(0) == in.dim(1), "BatchNorm was built for {} channels, got an input {}",
                   gamma_.shape().dim(0), in.to_string());
  auto bn = ops::batch_norm(s, x, gamma_, beta_, moving_mean_, moving_variance_,
                            {.epsilon = o_.epsilon, .is_training = ctx.training()});
  if (!ctx.training()) return bn.y;
  // moving -= (1 - momentum) * (moving - batch), the update above written as one assign.
  auto rate = ops::constant(s, float(1 - o_.momentum));
  auto move = [&](Output moving, Output batch) {
    return ops::assign_sub(s, moving, ops::mul(s, rate, ops::sub(s, moving, batch)));
  };
  std::vector<Output> updates{move(moving_mean_, bn.batch_mean), move(moving_variance_, bn.batch_variance)};
  return ops::identity(s.with_control_dependencies(updates), bn.y);
}

Output LRNLayer::build(Context& ctx, Output x) {
  return ops::lrn(ctx.scope(), x, {.depth_radius = o_.depth_radius, .bias = o_.bias, .alpha = o_.alpha, .beta = o_.beta});
}

}  // namespace troupe::layers
