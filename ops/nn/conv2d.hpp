#pragma once
// Conv2D in NCHW with OIHW filters, its input and filter gradients, through oneDNN 2.x.
#include <string>
#include <vector>

#include "graph/scope.hpp"

namespace troupe::ops {

struct Conv2DOptions {
  std::vector<int64_t> strides = {1, 1};
  std::string padding = "SAME";  // "SAME", "VALID" or "EXPLICIT"
  std::vector<int64_t> explicit_paddings = {0, 0, 0, 0};  // top, bottom, left, right
  std::vector<int64_t> dilations = {1, 1};
};

Output conv2d(const Scope& scope, Output input, Output filter, Conv2DOptions options = {});

}  // namespace troupe::ops

namespace troupe {

// Output size and padding of one spatial dimension, TensorFlow's rules: SAME gives
// ceil(in / stride) with the extra padding at the end, VALID none.
struct Window {
  int64_t out = 0, pad_before = 0, pad_after = 0;
};
Window window(int64_t in, int64_t kernel, int64_t stride, int64_t dilation, const std::string& padding,
              int64_t explicit_before, int64_t explicit_after);

}  // namespace troupe
