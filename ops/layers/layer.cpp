#include "ops/layers/layer.hpp"

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

Output Context::variable(const std::string& name, Shape shape, const ops::Initializer& init, bool trainable) {
  auto v = ops::variable(scope_.with_op_name(name), shape, DType::float32, {.trainable = trainable});
  auto value = ops::initial_value(scope_.sub(name + "_init"), init, shape, DType::float32, model_->next_seed());
  auto assign = ops::assign(scope_, v, value);
  ops::set_initializer(v, assign);  // so ops::global_variables_initializer() runs it too
  model_->inits_.push_back(assign);
  model_->variables_.push_back(v);
  model_->trainable_.push_back(trainable);
  return v;
}

Layer& Layer::set_name(std::string name) {
  TROUPE_CHECK_ARG(path_.empty(), "layer '{}' ({}) is named before its first call, not after", path_, kind());
  TROUPE_CHECK_ARG(!name.empty() && name.find('/') == std::string::npos,
                   "a layer's name must be non-empty and without '/', got '{}'", name);
  name_ = std::move(name);
  return *this;
}

Output Layer::build_many(Context& ctx, const std::vector<Output>& inputs) {
  TROUPE_CHECK_ARG(inputs.size() == 1, "{} takes one input, got {}", kind(), inputs.size());
  return build(ctx, inputs[0]);
}

Output Layer::operator()(Context& ctx, Output x) { return call(ctx, {x}, true); }
Output Layer::operator()(Context& ctx, const std::vector<Output>& inputs) { return call(ctx, inputs, true); }

Output Layer::call(Context& ctx, const std::vector<Output>& inputs, bool prefix_errors) {
  Scope scope = ctx.scope();
  try {
    if (path_.empty()) {
      scope = ctx.scope().sub(name_.empty() ? std::string(kind()) : name_);
      path_ = scope.prefix();
      // The name is the last part of the (made unique) prefix "<parent>/<name>/".
      std::string p = path_.substr(0, path_.size() - 1);
      name_ = p.substr(p.rfind('/') + 1);
      model_ = &ctx.model();
    } else {
      TROUPE_CHECK_ARG(model_ == &ctx.model(), "the layer belongs to another model (its variables are there)");
      scope = ctx.scope().sub(name_);
    }
    for (std::size_t i = 0; i < inputs.size(); ++i)
      TROUPE_CHECK_ARG(bool(inputs[i]), "input {} is an empty Output", i);
    Context inner(ctx.model(), scope, ctx.mode());
    return build_many(inner, inputs);
  } catch (const Error& e) {
    if (!prefix_errors) throw;
    std::string where = path_.empty() ? scope.prefix() + (name_.empty() ? kind() : name_) : path_;
    if (where.ends_with('/')) where.pop_back();
    throw Error(e.code(), fmt::format("layer '{}' ({}): {}", where, kind(), e.what()));
  }
}

Model::Model(const Scope& scope, int64_t seed) : scope_(scope.sub("model")), seed_(seed) {}

Output Model::loss(Output logits, Output labels) {
  Scope s = scope_.sub("loss");
  return ops::mean(s, ops::sparse_softmax_cross_entropy_with_logits(s, logits, labels));
}

Node* Model::initializer() {
  TROUPE_CHECK_ARG(!inits_.empty(), "the model has no variables yet: call its layers first");
  return ops::group(scope_.with_op_name("init"), inits_);
}

std::vector<Output> Model::trainable_variables() const {
  std::vector<Output> out;
  for (std::size_t i = 0; i < variables_.size(); ++i)
    if (trainable_[i]) out.push_back(variables_[i]);
  return out;
}

std::vector<Output> Model::non_trainable_variables() const {
  std::vector<Output> out;
  for (std::size_t i = 0; i < variables_.size(); ++i)
    if (!trainable_[i]) out.push_back(variables_[i]);
  return out;
}

int64_t Model::num_parameters() const {
  int64_t n = 0;
  for (auto& v : trainable_variables()) n += v.shape().num_elements();
  return n;
}

int64_t Model::num_non_trainable_parameters() const {
  int64_t n = 0;
  for (auto& v : non_trainable_variables()) n += v.shape().num_elements();
  return n;
}

}  // namespace troupe::layers
