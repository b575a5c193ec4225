#include "ops/layers/core.hpp"

#include "ops/all.hpp"

namespace troupe::layers {

Output DenseLayer::build(Context& ctx, Output x) {
  const Scope& s = ctx.scope();
  auto& in = x.shape();
  TROUPE_CHECK_ARG(in.rank_known() && in.rank() == 2 && in.dim(1) >= 0,
                   "Dense needs an input [batch, features] with known features, got {}", in.to_string());
  TROUPE_CHECK_ARG(o_.units > 0, "Dense needs units > 0, got {}", o_.units);
  if (!kernel_) {
    kernel_ = ctx.variable("kernel", Shape{in.dim(1), o_.units}, o_.kernel_init);
    if (o_.use_bias) bias_ = ctx.variable("bias", Shape{o_.units}, o_.bias_init);
  }
  TROUPE_CHECK_ARG(kernel_.shape().dim(0) == in.dim(1), "Dense was built for {} features, got an input {}",
                   kernel_.shape().dim(0), in.to_string());
  Output y = ops::matmul(s, x, kernel_);
  if (o_.use_bias) y = ops::bias_add(s, y, bias_);
  return activate(s, y, o_.activation);
}

Output FlattenLayer::build(Context& ctx, Output x) {
  auto& in = x.shape();
  TROUPE_CHECK_ARG(in.rank_known() && in.rank() >= 1, "Flatten needs an input of known rank, got {}", in.to_string());
  int64_t rest = 1;
  for (int d = 1; d < in.rank(); ++d) {
    TROUPE_CHECK_ARG(in.dim(d) >= 0, "Flatten needs known dimensions after the batch, got {}", in.to_string());
    rest *= in.dim(d);
  }
  return ops::reshape(ctx.scope(), x, {-1, rest});
}

Output DropoutLayer::build(Context& ctx, Output x) {
  if (!ctx.training() || o_.rate == 0) return x;
  if (seed_ == 0 && ctx.model().seed() != 0) seed_ = ctx.model().seed() * 7919 + ctx.model().next_seed();
  return ops::dropout(ctx.scope(), x, o_.rate, {.seed = seed_, .counter = o_.counter});
}

}  // namespace troupe::layers
