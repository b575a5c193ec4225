#pragma once
// BatchNorm and LRN layers.
#include "ops/layers/layer.hpp"

namespace troupe::layers {

// Batch normalisation over the channels (axis 1) of NCHW or [N, C] input. gamma and beta are
// trained; moving_mean and moving_variance are non-trainable variables. Training mode
// normalises with the batch's statistics and, whenever its output is computed, moves
//   moving = momentum * moving + (1 - momentum) * batch
// (the batch variance unbiased, n / (n - 1)); inference mode normalises with the moving
// averages and leaves them alone.
// The defaults are Keras' (momentum 0.99, epsilon 1e-3). PyTorch's BatchNorm2d defaults
// (momentum=0.1, eps=1e-5) weigh the batch by its momentum, the other way round: they are
// {.momentum = 0.9, .epsilon = 1e-5} here.
struct BatchNorm {
  double momentum = 0.99;
  double epsilon = 1e-3;
};
// Local response normalisation across channels (ops::lrn; TensorFlow's alpha convention).
struct LRN {
  int64_t depth_radius = 2;
  double bias = 1.0;
  double alpha = 1e-4;
  double beta = 0.75;
};

class BatchNormLayer final : public Layer {
 public:
  explicit BatchNormLayer(BatchNorm options = {}) : o_(options) {}
  const char* kind() const override { return "batch_norm"; }
  // Empty before the first call.
  Output gamma() const { return gamma_; }
  Output beta() const { return beta_; }
  Output moving_mean() const { return moving_mean_; }
  Output moving_variance() const { return moving_variance_; }

 protected:
  Output build(Context& ctx, Output x) override;

 private:
  BatchNorm o_;
  Output gamma_, beta_, moving_mean_, moving_variance_;
};

class LRNLayer final : public Layer {
 public:
  explicit LRNLayer(LRN options) : o_(options) {}
  const char* kind() const override { return "lrn"; }

 protected:
  Output build(Context& ctx, Output x) override;

 private:
  LRN o_;
};

}  // namespace troupe::layers
