#include "ops/layers/layers.hpp"

namespace troupe::layers {

Sequential& Sequential::add(std::unique_ptr<Layer> layer) {
  TROUPE_CHECK_ARG(calls_ == 0, "layers must be added before the model is first built");
  TROUPE_CHECK_ARG(layer && layer->path().empty(), "a Sequential takes a layer that has not been called yet");
  if (layer->name().empty()) layer->set_name(std::string(layer->kind()) + "_" + std::to_string(layers_.size()));
  layers_.push_back(std::move(layer));
  return *this;
}

Sequential& Sequential::add(Dense layer) { return add(std::make_unique<DenseLayer>(layer)); }
Sequential& Sequential::add(Conv2D layer) { return add(std::make_unique<Conv2DLayer>(layer)); }
Sequential& Sequential::add(MaxPool2D layer) { return add(std::make_unique<MaxPool2DLayer>(layer)); }
Sequential& Sequential::add(AvgPool2D layer) { return add(std::make_unique<AvgPool2DLayer>(layer)); }
Sequential& Sequential::add(GlobalAveragePooling2D layer) {
  return add(std::make_unique<GlobalAveragePooling2DLayer>(layer));
}
Sequential& Sequential::add(BatchNorm layer) { return add(std::make_unique<BatchNormLayer>(layer)); }
Sequential& Sequential::add(LRN layer) { return add(std::make_unique<LRNLayer>(layer)); }
Sequential& Sequential::add(Inception layer) { return add(std::make_unique<InceptionLayer>(layer)); }
Sequential& Sequential::add(Flatten layer) { return add(std::make_unique<FlattenLayer>(layer)); }
Sequential& Sequential::add(Dropout layer) {
  auto l = std::make_unique<DropoutLayer>(layer);
  if (seed()) l->set_seed(seed() * 7919 + int64_t(layers_.size()) + 1);
  return add(std::move(l));
}
Sequential& Sequential::add(Act layer) { return add(std::make_unique<ActLayer>(layer)); }

Output Sequential::operator()(Output x, Mode mode) {
  ++calls_;
  Context ctx = context(mode);
  Output y = x;
  for (std::size_t i = 0; i < layers_.size(); ++i) {
    try {
      y = layers_[i]->call(ctx, {y}, false);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("layer {} ({}): {}", i, layers_[i]->kind(), e.what()));
    }
  }
  return y;
}

}  // namespace troupe::layers
