#pragma once
// The layers API: a thin, typed layer over the graph builder, in the spirit of Keras'
// Sequential. A model is a list of layers; calling it on an input builds the graph for one mode
// (training or inference). Variables are created, with their initializers, the first time a
// layer is built; later calls (an inference graph beside the training one) share them.
//
//   layers::Sequential model(root, /*seed=*/1);
//   model.add(layers::Dense{.units = 256, .activation = layers::Activation::relu});
//   model.add(layers::Dense{.units = 10});
//   auto logits = model(x, layers::Mode::training);
//   auto loss = model.loss(logits, labels);               // mean sparse softmax cross-entropy
//   auto train = Optimizer::momentum(0.01, 0.9).minimize(root, loss);
//   session.run({}, {}, {model.initializer()});
#include <memory>
#include <string>
#include <vector>

#include "graph/scope.hpp"
#include "ops/layers/initializers.hpp"

namespace troupe::layers {

enum class Mode { training, inference };
enum class Activation { none, relu, sigmoid, tanh, elu, softmax };

class Sequential;

// What a layer sees while it builds: the scope for its nodes, the mode, and a way to make
// variables with initializers.
class BuildContext {
 public:
  BuildContext(Sequential& model, const Scope& scope, Mode mode) : model_(model), scope_(scope), mode_(mode) {}
  const Scope& scope() const { return scope_; }
  Mode mode() const { return mode_; }
  // A new float32 variable named "<layer>/<name>", initialised by `init`. Non-trainable ones
  // (moving statistics) are left out of Optimizer::minimize's default variables.
  Output variable(const std::string& name, Shape shape, const ops::Initializer& init, bool trainable = true);
  // A context for a part of the layer: its nodes and variables under "<layer>/<name>/".
  BuildContext sub(const std::string& name) const { return BuildContext(model_, scope_.sub(name), mode_); }

 private:
  Sequential& model_;
  Scope scope_;
  Mode mode_;
};

class Layer {
 public:
  virtual ~Layer() = default;
  virtual const char* kind() const = 0;
  // Builds the layer on x. Variables are made on the first call and reused afterwards.
  virtual Output build(BuildContext& ctx, Output x) = 0;
};

struct Dense {
  int64_t units = 0;
  Activation activation = Activation::none;
  bool use_bias = true;
  ops::Initializer kernel_init = ops::Initializer::glorot_uniform();
  ops::Initializer bias_init = ops::Initializer::zeros();
};
// NCHW convolution: filters [filters, in_channels, kernel, kernel]. padding is "SAME", "VALID" or
// "EXPLICIT" (then `pad` zeros on every side, as PyTorch's Conv2d(padding=pad)).
struct Conv2D {
  int64_t filters = 0;
  int64_t kernel = 3;
  int64_t stride = 1;
  std::string padding = "SAME";
  int64_t pad = 0;
  Activation activation = Activation::none;
  bool use_bias = true;
  ops::Initializer kernel_init = ops::Initializer::glorot_uniform();
  ops::Initializer bias_init = ops::Initializer::zeros();
};
struct MaxPool2D {
  int64_t size = 2;
  int64_t stride = 0;  // 0: the window size
  std::string padding = "VALID";
};
struct AvgPool2D {
  int64_t size = 2;
  int64_t stride = 0;
  std::string padding = "VALID";
};
// Batch normalisation over the channels (axis 1) of NCHW or [N, C] input: gamma and beta are
// trained; training mode normalises with the batch's statistics and moves the moving averages
// (moving = momentum * moving + (1 - momentum) * batch) whenever its output is computed;
// inference mode normalises with the moving averages.
struct BatchNorm {
  double momentum = 0.99;
  double epsilon = 1e-3;
};
// Local response normalisation across channels (ops::lrn; TensorFlow's alpha convention).
struct LRN {
  int64_t depth_radius = 2;
  double bias = 1.0;
  double alpha = 1e-4;
  double beta = 0.75;
};
// GoogLeNet's inception block on NCHW: four branches joined along the channels,
//   1x1 conv | 1x1 conv (b3_reduce) -> 3x3 conv | 1x1 conv (b5_reduce) -> 5x5 conv |
//   3x3 max pool, stride 1 -> 1x1 conv (pool_proj),
// every convolution with bias and ReLU, spatial size kept (SAME).
struct Inception {
  int64_t b1 = 0, b3_reduce = 0, b3 = 0, b5_reduce = 0, b5 = 0, pool_proj = 0;
};
struct Flatten {};  // [N, ...] -> [N, product of the rest]
struct Dropout {
  double rate = 0.5;  // active in Mode::training only
};
struct Act {
  Activation activation = Activation::relu;
};

class Sequential {
 public:
  explicit Sequential(const Scope& scope, int64_t seed = 0);
  Sequential(const Sequential&) = delete;
  Sequential& operator=(const Sequential&) = delete;

  Sequential& add(Dense layer);
  Sequential& add(Conv2D layer);
  Sequential& add(MaxPool2D layer);
  Sequential& add(AvgPool2D layer);
  Sequential& add(BatchNorm layer);
  Sequential& add(LRN layer);
  Sequential& add(Inception layer);
  Sequential& add(Flatten layer);
  Sequential& add(Dropout layer);
  Sequential& add(Act layer);
  Sequential& add(std::unique_ptr<Layer> layer);  // a layer of one's own

  // Builds the model on x. The first call creates the variables.
  Output operator()(Output x, Mode mode);
  // Mean sparse softmax cross-entropy of logits against int32/int64 labels.
  Output loss(Output logits, Output labels);
  // Runs every variable's initializer (a target for Session::run).
  Node* initializer();
  const std::vector<Output>& variables() const { return variables_; }
  int64_t num_parameters() const;  // elements over all variables
  int64_t next_seed() { return seed_ ? seed_ + int64_t(variables_.size()) + 1 : 0; }
  const Scope& scope() const { return scope_; }

 private:
  friend class BuildContext;
  Scope scope_;
  int64_t seed_;
  std::vector<std::unique_ptr<Layer>> layers_;
  std::vector<Output> variables_;
  std::vector<Output> inits_;
  int calls_ = 0;
};

Output activate(const Scope& scope, Output x, Activation activation);

}  // namespace troupe::layers
