#include "ops/layers/pooling.hpp"

#include "ops/all.hpp"

namespace troupe::layers {
namespace {

ops::PoolOptions pool_options(const char* what, int64_t size, int64_t stride, const std::string& padding, int64_t pad) {
  TROUPE_CHECK_ARG(size > 0 && stride >= 0, "{} needs size > 0 and stride >= 0, got size {} and stride {}", what, size,
                   stride);
  TROUPE_CHECK_ARG(pad >= 0 && (pad == 0 || padding == "EXPLICIT"), "{}'s pad ({}) needs padding \"EXPLICIT\" (got \"{}\")",
                   what, pad, padding);
  const int64_t s = stride ? stride : size;
  return {.ksize = {size, size}, .strides = {s, s}, .padding = padding, .explicit_paddings = {pad, pad, pad, pad}};
}

}  // namespace

Output MaxPool2DLayer::build(Context& ctx, Output x) {
  return ops::max_pool(ctx.scope(), x, pool_options("MaxPool2D", o_.size, o_.stride, o_.padding, o_.pad));
}

Output AvgPool2DLayer::build(Context& ctx, Output x) {
  auto options = pool_options("AvgPool2D", o_.size, o_.stride, o_.padding, o_.pad);
  options.count_include_pad = o_.count_include_pad;
  return ops::avg_pool(ctx.scope(), x, options);
}

Output GlobalAveragePooling2DLayer::build(Context& ctx, Output x) {
  auto& in = x.shape();
  TROUPE_CHECK_ARG(in.rank_known() && in.rank() == 4, "GlobalAveragePooling2D needs an NCHW input, got {}",
                   in.to_string());
  return ops::mean(ctx.scope(), x, std::vector<int64_t>{2, 3});
}

}  // namespace troupe::layers
