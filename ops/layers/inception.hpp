#pragma once
// GoogLeNet's inception block on NCHW: four branches joined along the channels,
//   1x1 conv | 1x1 conv (b3_reduce) -> 3x3 conv | 1x1 conv (b5_reduce) -> 5x5 conv |
//   3x3 max pool, stride 1 -> 1x1 conv (pool_proj),
// every convolution with bias and ReLU, spatial size kept (SAME). A layer made of layers.
#include "ops/layers/convolution.hpp"
#include "ops/layers/merge.hpp"
#include "ops/layers/pooling.hpp"

namespace troupe::layers {

struct Inception {
  int64_t b1 = 0, b3_reduce = 0, b3 = 0, b5_reduce = 0, b5 = 0, pool_proj = 0;
};

class InceptionLayer final : public Layer {
 public:
  explicit InceptionLayer(Inception options);
  const char* kind() const override { return "inception"; }

 protected:
  Output build(Context& ctx, Output x) override;

 private:
  Inception o_;
  Conv2DLayer b1_, b3_reduce_, b3_, b5_reduce_, b5_;
  MaxPool2DLayer pool_;
  Conv2DLayer pool_proj_;
  ConcatenateLayer concat_;
};

}  // namespace troupe::layers
