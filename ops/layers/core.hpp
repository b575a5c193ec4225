#pragma once
// Keras' core layers: Dense, Flatten, Dropout and a plain activation. Each option struct X has
// its layer class XLayer, constructible from it (Sequential::add(X{...}) adds an XLayer).
#include "ops/layers/layer.hpp"

namespace troupe::layers {

// x [batch, features] -> activation(x kernel + bias), kernel [features, units].
struct Dense {
  int64_t units = 0;
  Activation activation = Activation::none;
  bool use_bias = true;
  ops::Initializer kernel_init = ops::Initializer::glorot_uniform();
  ops::Initializer bias_init = ops::Initializer::zeros();
};
struct Flatten {};  // [N, ...] -> [N, product of the rest]
struct Dropout {
  double rate = 0.5;  // active in Mode::training only
  // E.g. ops::global_step's value: each step's mask from (seed, step), so a resumed run draws
  // the masks the uninterrupted one drew (ops::DropoutOptions::counter).
  Output counter = {};
};
struct Act {
  Activation activation = Activation::relu;
};

class DenseLayer final : public Layer {
 public:
  explicit DenseLayer(Dense options) : o_(options) {}
  const char* kind() const override { return "dense"; }
  Output kernel() const { return kernel_; }  // empty before the first call
  Output bias() const { return bias_; }

 protected:
  Output build(Context& ctx, Output x) override;

 private:
  Dense o_;
  Output kernel_, bias_;
};

class FlattenLayer final : public Layer {
 public:
  explicit FlattenLayer(Flatten = {}) {}
  const char* kind() const override { return "flatten"; }

 protected:
  Output build(Context& ctx, Output x) override;
};

// The mask's seed: set_seed's, else one drawn from the model's seed at the first call (none
// when the model has no seed).
class DropoutLayer final : public Layer {
 public:
  explicit DropoutLayer(Dropout options) : o_(options) {}
  const char* kind() const override { return "dropout"; }
  void set_seed(int64_t seed) { seed_ = seed; }

 protected:
  Output build(Context& ctx, Output x) override;

 private:
  Dropout o_;
  int64_t seed_ = 0;
};

class ActLayer final : public Layer {
 public:
  explicit ActLayer(Act options) : o_(options) {}
  const char* kind() const override { return "activation"; }

 protected:
  Output build(Context& ctx, Output x) override { return activate(ctx.scope(), x, o_.activation); }

 private:
  Act o_;
};

}  // namespace troupe::layers
