#include "ops/layers/convolution.hpp"

#include "ops/all.hpp"

namespace troupe::layers {

Output Conv2DLayer::build(Context& ctx, Output x) {
  const Scope& s = ctx.scope();
  auto& in = x.shape();
  TROUPE_CHECK_ARG(in.rank_known() && in.rank() == 4 && in.dim(1) >= 0,
                   "Conv2D needs an NCHW input with known channels, got {}", in.to_string());
  TROUPE_CHECK_ARG(o_.filters > 0 && o_.kernel > 0 && o_.stride > 0, "Conv2D needs filters, kernel and stride > 0");
  TROUPE_CHECK_ARG(o_.pad >= 0 && (o_.pad == 0 || o_.padding == "EXPLICIT"),
                   "Conv2D's pad ({}) needs padding \"EXPLICIT\" (got \"{}\")", o_.pad, o_.padding);
  if (!kernel_) {
    kernel_ = ctx.variable("kernel", Shape{o_.filters, in.dim(1), o_.kernel, o_.kernel}, o_.kernel_init);
    if (o_.use_bias) bias_ = ctx.variable("bias", Shape{o_.filters}, o_.bias_init);
  }
  Output y = ops::conv2d(s, x, kernel_,
                         {.strides = {o_.stride, o_.stride},
                          .padding = o_.padding,
                          .explicit_paddings = {o_.pad, o_.pad, o_.pad, o_.pad}});
  if (o_.use_bias) y = ops::bias_add(s, y, bias_);
  return activate(s, y, o_.activation);
}

}  // namespace troupe::layers
