#pragma once
// Local response normalisation across channels (AlexNet, GoogLeNet), TensorFlow's definition
// on NCHW: y[n,c,h,w] = x[n,c,h,w] / (bias + alpha * sum of x[n,c',h,w]^2 over
// c-depth_radius <= c' <= c+depth_radius)^beta. With its gradient, through oneDNN 2.x.
#include "graph/scope.hpp"

namespace troupe::ops {

struct LrnOptions {
  int64_t depth_radius = 5;
  double bias = 1.0;
  double alpha = 1.0;
  double beta = 0.5;
};

Output lrn(const Scope& scope, Output input, LrnOptions options = {});

}  // namespace troupe::ops
