#pragma once
// Pooling layers over NCHW: MaxPool2D and AvgPool2D (ops::max_pool / avg_pool) and
// GlobalAveragePooling2D (the mean over each channel's plane).
#include <string>

#include "ops/layers/layer.hpp"

namespace troupe::layers {

// padding is "VALID", "SAME" or "EXPLICIT" (then `pad` on every side, as PyTorch's
// MaxPool2d(padding=pad); pad must be smaller than size). Max pooling never picks the padding.
struct MaxPool2D {
  int64_t size = 2;
  int64_t stride = 0;  // 0: the window size
  std::string padding = "VALID";
  int64_t pad = 0;
};
// The average leaves padding out (TensorFlow, Keras) unless count_include_pad is set, when it
// divides by the whole window, padding included: PyTorch's AvgPool2d(size, stride, padding=pad)
// is {.size, .stride, .padding = "EXPLICIT", .pad, .count_include_pad = true}.
struct AvgPool2D {
  int64_t size = 2;
  int64_t stride = 0;  // 0: the window size
  std::string padding = "VALID";
  int64_t pad = 0;
  bool count_include_pad = false;
};
// [N, C, H, W] -> [N, C]: each channel's mean over its H x W plane.
struct GlobalAveragePooling2D {};

class MaxPool2DLayer final : public Layer {
 public:
  explicit MaxPool2DLayer(MaxPool2D options) : o_(std::move(options)) {}
  const char* kind() const override { return "max_pool"; }

 protected:
  Output build(Context& ctx, Output x) override;

 private:
  MaxPool2D o_;
};

class AvgPool2DLayer final : public Layer {
 public:
  explicit AvgPool2DLayer(AvgPool2D options) : o_(std::move(options)) {}
  const char* kind() const override { return "avg_pool"; }

 protected:
  Output build(Context& ctx, Output x) override;

 private:
  AvgPool2D o_;
};

class GlobalAveragePooling2DLayer final : public Layer {
 public:
  explicit GlobalAveragePooling2DLayer(GlobalAveragePooling2D = {}) {}
  const char* kind() const override { return "global_average_pooling2d"; }

 protected:
  Output build(Context& ctx, Output x) override;
};

}  // namespace troupe::layers
