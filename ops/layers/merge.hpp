#pragma once
// Joins of several inputs, for models with branches: Add (the element-wise sum of inputs of
// one shape, as a residual connection) and Concatenate (along an axis, NCHW channels by
// default). Called with a list: `add(ctx, {x, y})`.
#include "ops/layers/layer.hpp"

namespace troupe::layers {

struct Add {};
struct Concatenate {
  int64_t axis = 1;  // negative: counted from the end
};

class AddLayer final : public Layer {
 public:
  explicit AddLayer(Add = {}) {}
  const char* kind() const override { return "add"; }

 protected:
  Output build(Context& ctx, Output x) override { return build_many(ctx, {x}); }
  Output build_many(Context& ctx, const std::vector<Output>& inputs) override;
};

class ConcatenateLayer final : public Layer {
 public:
  explicit ConcatenateLayer(Concatenate options = {}) : o_(options) {}
  const char* kind() const override { return "concatenate"; }

 protected:
  Output build(Context& ctx, Output x) override { return build_many(ctx, {x}); }
  Output build_many(Context& ctx, const std::vector<Output>& inputs) override;

 private:
  Concatenate o_;
};

}  // namespace troupe::layers
