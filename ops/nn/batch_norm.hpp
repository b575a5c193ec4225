#pragma once
// Batch normalisation over the channel axis of NCHW (or [N, C]) input, TensorFlow's
// FusedBatchNorm: y = scale * (x - mean) / sqrt(variance + epsilon) + offset, per channel.
// Training uses the batch's statistics and returns them (the variance Bessel-corrected, for
// moving averages); inference uses the given mean and variance. With gradients for x, scale
// and offset in both modes, through oneDNN 2.x.
#include "graph/scope.hpp"

namespace troupe::ops {

struct BatchNormOptions {
  double epsilon = 1e-3;
  bool is_training = true;
};

struct BatchNormOutputs {
  Output y;
  Output batch_mean;      // training: the batch's; inference: `mean`
  Output batch_variance;  // training: the batch's, unbiased; inference: `variance`
};

// scale, offset, mean, variance: [C]. In training, mean and variance are not read (feed any
// [C] tensor, e.g. the moving averages).
BatchNormOutputs batch_norm(const Scope& scope, Output x, Output scale, Output offset, Output mean,
                            Output variance, BatchNormOptions options = {});

}  // namespace troupe::ops
