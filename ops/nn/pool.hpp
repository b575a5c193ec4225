#pragma once
// MaxPool and AvgPool over NCHW, with gradients, through oneDNN 2.x.
//
// Padding is TensorFlow's "SAME" or "VALID", or "EXPLICIT" with `explicit_paddings` (top, bottom,
// left, right) as conv2d takes them: PyTorch's MaxPool2d(padding=p) / AvgPool2d(padding=p) is
// "EXPLICIT" with {p, p, p, p}. Each explicit padding must be smaller than the window along its
// dimension, so that every window covers at least one input element. Max pooling never picks a
// padded position. Average pooling divides by the number of input elements in the window
// (TensorFlow's rule) unless `count_include_pad` is set, when it divides by the full window
// size, the zero padding counted (PyTorch's AvgPool2d default, count_include_pad=True).
#include <string>
#include <vector>

#include "graph/scope.hpp"

namespace troupe::ops {

struct PoolOptions {
  std::vector<int64_t> ksize = {2, 2};
  std::vector<int64_t> strides = {2, 2};
  std::string padding = "VALID";                          // "SAME", "VALID" or "EXPLICIT"
  std::vector<int64_t> explicit_paddings = {0, 0, 0, 0};  // top, bottom, left, right
  bool count_include_pad = false;                         // avg_pool only
};

Output max_pool(const Scope& scope, Output input, PoolOptions options = {});
Output avg_pool(const Scope& scope, Output input, PoolOptions options = {});

}  // namespace troupe::ops
