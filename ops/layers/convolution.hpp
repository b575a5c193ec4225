#pragma once
// Conv2D: NCHW convolution with filters [filters, in_channels, kernel, kernel] (OIHW).
#include <string>

#include "ops/layers/layer.hpp"

namespace troupe::layers {

// padding is "SAME", "VALID" or "EXPLICIT" (then `pad` zeros on every side, as PyTorch's
// Conv2d(padding=pad)).
struct Conv2D {
  int64_t filters = 0;
  int64_t kernel = 3;
  int64_t stride = 1;
  std::string padding = "SAME";
  int64_t pad = 0;
  Activation activation = Activation::none;
  bool use_bias = true;
  ops::Initializer kernel_init = ops::Initializer::glorot_uniform();
  ops::Initializer bias_init = ops::Initializer::zeros();
};

class Conv2DLayer final : public Layer {
 public:
  explicit Conv2DLayer(Conv2D options) : o_(std::move(options)) {}
  const char* kind() const override { return "conv2d"; }
  Output kernel() const { return kernel_; }  // empty before the first call
  Output bias() const { return bias_; }

 protected:
  Output build(Context& ctx, Output x) override;

 private:
  Conv2D o_;
  Output kernel_, bias_;
};

}  // namespace troupe::layers
