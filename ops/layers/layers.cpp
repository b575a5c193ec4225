#include "ops/layers/layers.hpp"

#include "ops/all.hpp"

namespace troupe::layers {

Output activate(const Scope& s, Output x, Activation a) {
  switch (a) {
    case Activation::none: return x;
    case Activation::relu: return ops::relu(s, x);
    case Activation::sigmoid: return ops::sigmoid(s, x);
    case Activation::tanh: return ops::tanh(s, x);
    case Activation::elu: return ops::elu(s, x);
    case Activation::softmax: return ops::softmax(s, x);
  }
  return x;
}

Output BuildContext::variable(const std::string& name, Shape shape, const ops::Initializer& init, bool trainable) {
  auto v = ops::variable(scope_.with_op_name(name), shape, DType::float32, {.trainable = trainable});
  auto value = ops::initial_value(scope_.sub(name + "_init"), init, shape, DType::float32, model_.next_seed());
  model_.inits_.push_back(ops::assign(scope_, v, value));
  model_.variables_.push_back(v);
  return v;
}

namespace {

class DenseLayer final : public Layer {
 public:
  explicit DenseLayer(Dense o) : o_(o) {}
  const char* kind() const override { return "dense"; }
  Output build(BuildContext& ctx, Output x) override {
    const Scope& s = ctx.scope();
    auto& in = x.shape();
    TROUPE_CHECK_ARG(in.rank_known() && in.rank() == 2 && in.dim(1) >= 0,
                     "Dense needs an input [batch, features] with known features, got {}", in.to_string());
    TROUPE_CHECK_ARG(o_.units > 0, "Dense needs units > 0, got {}", o_.units);
    if (!kernel_) {
      kernel_ = ctx.variable("kernel", Shape{in.dim(1), o_.units}, o_.kernel_init);
      if (o_.use_bias) bias_ = ctx.variable("bias", Shape{o_.units}, o_.bias_init);
    }
    Output y = ops::matmul(s, x, kernel_);
    if (o_.use_bias) y = ops::bias_add(s, y, bias_);
    return activate(s, y, o_.activation);
  }

 private:
  Dense o_;
  Output kernel_, bias_;
};

class Conv2DLayer final : public Layer {
 public:
  explicit Conv2DLayer(Conv2D o) : o_(o) {}
  const char* kind() const override { return "conv2d"; }
  Output build(BuildContext& ctx, Output x) override {
    const Scope& s = ctx.scope();
    auto& in = x.shape();
    TROUPE_CHECK_ARG(in.rank_known() && in.rank() == 4 && in.dim(1) >= 0,
                     "Conv2D needs an NCHW input with known channels, got {}", in.to_string());
    TROUPE_CHECK_ARG(o_.filters > 0 && o_.kernel > 0 && o_.stride > 0, "Conv2D needs filters, kernel and stride > 0");
    if (!kernel_) {
      kernel_ = ctx.variable("kernel", Shape{o_.filters, in.dim(1), o_.kernel, o_.kernel}, o_.kernel_init);
      if (o_.use_bias) bias_ = ctx.variable("bias", Shape{o_.filters}, o_.bias_init);
    }
    TROUPE_CHECK_ARG(o_.pad >= 0 && (o_.pad == 0 || o_.padding == "EXPLICIT"),
                     "Conv2D's pad ({}) needs padding \"EXPLICIT\" (got \"{}\")", o_.pad, o_.padding);
    Output y = ops::conv2d(s, x, kernel_,
                           {.strides = {o_.stride, o_.stride},
                            .padding = o_.padding,
                            .explicit_paddings = {o_.pad, o_.pad, o_.pad, o_.pad}});
    if (o_.use_bias) y = ops::bias_add(s, y, bias_);
    return activate(s, y, o_.activation);
  }

 private:
  Conv2D o_;
  Output kernel_, bias_;
};

template <bool kMax>
class PoolLayer final : public Layer {
 public:
  PoolLayer(int64_t size, int64_t stride, std::string padding)
      : o_{.ksize = {size, size}, .strides = {stride ? stride : size, stride ? stride : size}, .padding = padding} {}
  const char* kind() const override { return kMax ? "max_pool" : "avg_pool"; }
  Output build(BuildContext& ctx, Output x) override {
    return kMax ? ops::max_pool(ctx.scope(), x, o_) : ops::avg_pool(ctx.scope(), x, o_);
  }

 private:
  ops::PoolOptions o_;
};

class BatchNormLayer final : public Layer {
 public:
  explicit BatchNormLayer(BatchNorm o) : o_(o) {}
  const char* kind() const override { return "batch_norm"; }
  Output build(BuildContext& ctx, Output x) override {
    const Scope& s = ctx.scope();
    auto& in = x.shape();
    TROUPE_CHECK_ARG(in.rank_known() && (in.rank() == 2 || in.rank() == 4) && in.dim(1) >= 0,
                     "BatchNorm needs an NCHW or [N, C] input with known channels, got {}", in.to_string());
    TROUPE_CHECK_ARG(o_.momentum >= 0 && o_.momentum < 1, "BatchNorm needs 0 <= momentum < 1, got {}", o_.momentum);
    if (!gamma_) {
      Shape c{in.dim(1)};
      gamma_ = ctx.variable("gamma", c, ops::Initializer::constant(1));
      beta_ = ctx.variable("beta", c, ops::Initializer::zeros());
      moving_mean_ = ctx.variable("moving_mean", c, ops::Initializer::zeros(), false);
      moving_variance_ = ctx.variable("moving_variance", c, ops::Initializer::constant(1), false);
    }
    const bool training = ctx.mode() == Mode::training;
    auto bn = ops::batch_norm(s, x, gamma_, beta_, moving_mean_, moving_variance_,
                              {.epsilon = o_.epsilon, .is_training = training});
    if (!training) return bn.y;
    auto rate = ops::constant(s, float(1 - o_.momentum));
    auto move = [&](Output moving, Output batch) {
      return ops::assign_sub(s, moving, ops::mul(s, rate, ops::sub(s, moving, batch)));
    };
    std::vector<Output> updates{move(moving_mean_, bn.batch_mean), move(moving_variance_, bn.batch_variance)};
    return ops::identity(s.with_control_dependencies(updates), bn.y);
  }

 private:
  BatchNorm o_;
  Output gamma_, beta_, moving_mean_, moving_variance_;
};

class LrnLayer final : public Layer {
 public:
  explicit LrnLayer(LRN o) : o_(o) {}
  const char* kind() const override { return "lrn"; }
  Output build(BuildContext& ctx, Output x) override {
    return ops::lrn(ctx.scope(), x,
                    {.depth_radius = o_.depth_radius, .bias = o_.bias, .alpha = o_.alpha, .beta = o_.beta});
  }

 private:
  LRN o_;
};

class InceptionLayer final : public Layer {
 public:
  explicit InceptionLayer(Inception o)
      : o_(o),
        b1_(conv(o.b1, 1)),
        b3_reduce_(conv(o.b3_reduce, 1)),
        b3_(conv(o.b3, 3)),
        b5_reduce_(conv(o.b5_reduce, 1)),
        b5_(conv(o.b5, 5)),
        pool_(3, 1, "SAME"),
        pool_proj_(conv(o.pool_proj, 1)) {}
  const char* kind() const override { return "inception"; }
  Output build(BuildContext& ctx, Output x) override {
    TROUPE_CHECK_ARG(o_.b1 > 0 && o_.b3_reduce > 0 && o_.b3 > 0 && o_.b5_reduce > 0 && o_.b5 > 0 && o_.pool_proj > 0,
                     "Inception needs every branch's filters > 0");
    auto part = [&](Layer& layer, const char* name, Output in) {
      BuildContext sub = ctx.sub(name);
      return layer.build(sub, in);
    };
    std::vector<Output> branches{
        part(b1_, "1x1", x),
        part(b3_, "3x3", part(b3_reduce_, "3x3_reduce", x)),
        part(b5_, "5x5", part(b5_reduce_, "5x5_reduce", x)),
        part(pool_proj_, "pool_proj", part(pool_, "pool", x)),
    };
    return ops::concat(ctx.scope(), branches, 1);
  }

 private:
  static Conv2DLayer conv(int64_t filters, int64_t kernel) {
    return Conv2DLayer(Conv2D{.filters = filters, .kernel = kernel, .activation = Activation::relu});
  }
  Inception o_;
  Conv2DLayer b1_, b3_reduce_, b3_, b5_reduce_, b5_;
  PoolLayer<true> pool_;
  Conv2DLayer pool_proj_;
};

class FlattenLayer final : public Layer {
 public:
  const char* kind() const override { return "flatten"; }
  Output build(BuildContext& ctx, Output x) override {
    auto& in = x.shape();
    TROUPE_CHECK_ARG(in.rank_known() && in.rank() >= 1, "Flatten needs an input of known rank, got {}", in.to_string());
    int64_t rest = 1;
    for (int d = 1; d < in.rank(); ++d) {
      TROUPE_CHECK_ARG(in.dim(d) >= 0, "Flatten needs known dimensions after the batch, got {}", in.to_string());
      rest *= in.dim(d);
    }
    return ops::reshape(ctx.scope(), x, {-1, rest});
  }
};

class DropoutLayer final : public Layer {
 public:
  explicit DropoutLayer(Dropout o) : o_(o) {}
  const char* kind() const override { return "dropout"; }
  Output build(BuildContext& ctx, Output x) override {
    if (ctx.mode() == Mode::inference || o_.rate == 0) return x;
    return ops::dropout(ctx.scope(), x, o_.rate, {.seed = seed_ ? seed_ : 0});
  }
  void set_seed(int64_t seed) { seed_ = seed; }

 private:
  Dropout o_;
  int64_t seed_ = 0;
};

class ActLayer final : public Layer {
 public:
  explicit ActLayer(Act o) : o_(o) {}
  const char* kind() const override { return "activation"; }
  Output build(BuildContext& ctx, Output x) override { return activate(ctx.scope(), x, o_.activation); }

 private:
  Act o_;
};

}  // namespace

Sequential::Sequential(const Scope& scope, int64_t seed) : scope_(scope.sub("model")), seed_(seed) {}

Sequential& Sequential::add(std::unique_ptr<Layer> layer) {
  TROUPE_CHECK_ARG(calls_ == 0, "layers must be added before the model is first built");
  layers_.push_back(std::move(layer));
  return *this;
}

Sequential& Sequential::add(Dense layer) { return add(std::make_unique<DenseLayer>(layer)); }
Sequential& Sequential::add(Conv2D layer) { return add(std::make_unique<Conv2DLayer>(layer)); }
Sequential& Sequential::add(MaxPool2D l) { return add(std::make_unique<PoolLayer<true>>(l.size, l.stride, l.padding)); }
Sequential& Sequential::add(AvgPool2D l) { return add(std::make_unique<PoolLayer<false>>(l.size, l.stride, l.padding)); }
Sequential& Sequential::add(BatchNorm layer) { return add(std::make_unique<BatchNormLayer>(layer)); }
Sequential& Sequential::add(LRN layer) { return add(std::make_unique<LrnLayer>(layer)); }
Sequential& Sequential::add(Inception layer) { return add(std::make_unique<InceptionLayer>(layer)); }
Sequential& Sequential::add(Flatten) { return add(std::make_unique<FlattenLayer>()); }
Sequential& Sequential::add(Dropout layer) {
  auto l = std::make_unique<DropoutLayer>(layer);
  if (seed_) l->set_seed(seed_ * 7919 + int64_t(layers_.size()) + 1);
  return add(std::move(l));
}
Sequential& Sequential::add(Act layer) { return add(std::make_unique<ActLayer>(layer)); }

Output Sequential::operator()(Output x, Mode mode) {
  ++calls_;
  Output y = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    // Variables live under "model/<kind>_<i>/"; each call's ops under its own sub-scope.
    Scope layer_scope = scope_.sub(std::string(layers_[i]->kind()) + "_" + std::to_string(i));
    BuildContext ctx(*this, layer_scope, mode);
    try {
      y = layers_[i]->build(ctx, y);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("layer {} ({}): {}", i, layers_[i]->kind(), e.what()));
    }
  }
  return y;
}

Output Sequential::loss(Output logits, Output labels) {
  Scope s = scope_.sub("loss");
  return ops::mean(s, ops::sparse_softmax_cross_entropy_with_logits(s, logits, labels));
}

Node* Sequential::initializer() {
  TROUPE_CHECK_ARG(!inits_.empty(), "the model has no variables yet: build it first");
  return ops::group(scope_.with_op_name("init"), inits_);
}

int64_t Sequential::num_parameters() const {
  int64_t n = 0;
  for (auto& v : variables_) n += v.shape().num_elements();
  return n;
}

}  // namespace troupe::layers
