#pragma once
// The layers API, in the spirit of Keras. This header brings all of it:
//   layer.hpp          Layer, Context, Model, Mode, Activation
//   core.hpp           Dense, Flatten, Dropout, Act
//   convolution.hpp    Conv2D
//   pooling.hpp        MaxPool2D, AvgPool2D, GlobalAveragePooling2D
//   normalization.hpp  BatchNorm, LRN
//   merge.hpp          Add, Concatenate
//   inception.hpp      Inception
// and Sequential, a Model that is a chain of layers:
//
//   layers::Sequential model(root, /*seed=*/1);
//   model.add(layers::Dense{.units = 256, .activation = layers::Activation::relu});
//   model.add(layers::Dense{.units = 10});
//   auto logits = model(x, layers::Mode::training);
//   auto loss = model.loss(logits, labels);               // mean sparse softmax cross-entropy
//   auto train = Optimizer::momentum(0.01, 0.9).minimize(root, loss);
//   session.run({}, {}, {model.initializer()});
//
// Models with branches call layers themselves (the functional way, layer.hpp's Model).
#include <memory>
#include <string>
#include <vector>

#include "ops/layers/convolution.hpp"
#include "ops/layers/core.hpp"
#include "ops/layers/inception.hpp"
#include "ops/layers/layer.hpp"
#include "ops/layers/merge.hpp"
#include "ops/layers/normalization.hpp"
#include "ops/layers/pooling.hpp"

namespace troupe::layers {

// Layer i is named "<kind>_<i>" (its variables under "model/<kind>_<i>/"); an error while
// building is prefixed with "layer <i> (<kind>): ".
class Sequential : public Model {
 public:
  explicit Sequential(const Scope& scope, int64_t seed = 0) : Model(scope, seed) {}

  Sequential& add(Dense layer);
  Sequential& add(Conv2D layer);
  Sequential& add(MaxPool2D layer);
  Sequential& add(AvgPool2D layer);
  Sequential& add(GlobalAveragePooling2D layer);
  Sequential& add(BatchNorm layer);
  Sequential& add(LRN layer);
  Sequential& add(Inception layer);
  Sequential& add(Flatten layer);
  Sequential& add(Dropout layer);
  Sequential& add(Act layer);
  Sequential& add(std::unique_ptr<Layer> layer);  // a layer of one's own

  // Builds the model on x. The first call creates the variables.
  Output operator()(Output x, Mode mode);

 private:
  std::vector<std::unique_ptr<Layer>> layers_;
  int calls_ = 0;
};

}  // namespace troupe::layers
