#pragma once
// The layers API's core: a Layer owns its variables and builds ops when called; a Model owns the
// list of every variable its layers made (their initializers, trainable or not) and is where a
// graph of layers is called from.
//
// A layer is called on an input in a Context: the scope to build under, the mode (training or
// inference) and the Model that records the variables. Its first call names it (its own name,
// or its kind made unique in the caller's scope: "conv2d", "conv2d_1", ...) and creates its
// variables under "<caller scope>/<name>/"; later calls, in either mode, build new ops
// ("<name>_1/", ...) that read the same variables. So a training graph and an inference graph
// beside it share the weights, and a layer called twice shares them as Keras' layers do.
//
// Layers hold Outputs into the graph; they stay usable as long as the graph lives. A layer
// belongs to the Model it was first called in.
#include <optional>
#include <string>
#include <vector>

#include "graph/scope.hpp"
#include "ops/layers/initializers.hpp"

namespace troupe::layers {

enum class Mode { training, inference };
enum class Activation { none, relu, sigmoid, tanh, elu, softmax };

Output activate(const Scope& scope, Output x, Activation activation);

class Model;

// What a layer sees while it builds: the scope for its nodes, the mode, and a way to make
// variables with initializers.
class Context {
 public:
  Context(Model& model, const Scope& scope, Mode mode) : model_(&model), scope_(scope), mode_(mode) {}
  const Scope& scope() const { return scope_; }
  Mode mode() const { return mode_; }
  bool training() const { return mode_ == Mode::training; }
  Model& model() const { return *model_; }
  // A new float32 variable "<scope>/<name>", initialised by `init`. Non-trainable ones (moving
  // statistics) are left out of Optimizer::minimize's default variables and of
  // Model::num_parameters.
  Output variable(const std::string& name, Shape shape, const ops::Initializer& init, bool trainable = true);
  // A context for a part of the layer: its nodes and variables under "<scope>/<name>/".
  Context sub(const std::string& name) const { return Context(*model_, scope_.sub(name), mode_); }

 private:
  Model* model_;
  Scope scope_;
  Mode mode_;
};
using BuildContext = Context;  // the name layers of one's own used before Context

// The base of every layer, and of a user's own: override kind() and build(); a layer made of
// other layers holds them as members and calls them in build() (their variables then live
// under this layer's scope). Layers that join several inputs (Add, Concatenate) override
// build_many() as well.
class Layer {
 public:
  Layer() = default;
  Layer(const Layer&) = delete;
  Layer& operator=(const Layer&) = delete;
  virtual ~Layer() = default;

  virtual const char* kind() const = 0;

  // Calls the layer on x (or on several inputs) in ctx's mode, under ctx's scope. An error is
  // prefixed with the layer: "layer 'model/conv2d_1' (conv2d): ...".
  Output operator()(Context& ctx, Output x);
  Output operator()(Context& ctx, const std::vector<Output>& inputs);

  // The name under its caller's scope: set_name's, or given at the first call.
  const std::string& name() const { return name_; }
  // Names the layer before its first call (else it takes its kind made unique).
  Layer& set_name(std::string name);
  // Where its variables live ("model/block/conv2d/"); empty before the first call.
  const std::string& path() const { return path_; }

 protected:
  // Builds the layer's ops on x under ctx.scope(); make variables on the first call (while
  // they are still empty) and reuse them afterwards.
  virtual Output build(Context& ctx, Output x) = 0;
  // Several inputs: one is passed on to build(); joins override this.
  virtual Output build_many(Context& ctx, const std::vector<Output>& inputs);

 private:
  friend class Sequential;
  Output call(Context& ctx, const std::vector<Output>& inputs, bool prefix_errors);
  std::string name_;
  std::string path_;
  const Model* model_ = nullptr;
};

// The variables of a model: their initializers, and the entry point for calling layers.
//
//   layers::Model model(root, /*seed=*/1);
//   layers::Context train = model.context(layers::Mode::training);
//   auto logits = dense(train, x);          // any graph of layers, built by plain C++ calls
//   session.run({}, {}, {model.initializer()});
class Model {
 public:
  // Layers called in this model's contexts build under "<scope>/model/". A seed other than 0
  // makes the variables' initial values (and Dropout's masks) repeatable.
  explicit Model(const Scope& scope, int64_t seed = 0);
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;
  virtual ~Model() = default;

  // The context to call the model's layers in, under the model's scope.
  Context context(Mode mode) { return Context(*this, scope_, mode); }
  // Mean sparse softmax cross-entropy of logits against int32/int64 labels.
  Output loss(Output logits, Output labels);
  // Runs every variable's initializer (a target for Session::run).
  Node* initializer();

  const std::vector<Output>& variables() const { return variables_; }  // in creation order
  std::vector<Output> trainable_variables() const;
  std::vector<Output> non_trainable_variables() const;
  int64_t num_parameters() const;                // elements of the trainable variables
  int64_t num_non_trainable_parameters() const;  // elements of the others (moving statistics)

  // The seed for the next random initializer or op: 0 when the model has none.
  int64_t next_seed() { return seed_ ? seed_ + int64_t(variables_.size()) + 1 : 0; }
  int64_t seed() const { return seed_; }
  const Scope& scope() const { return scope_; }

 private:
  friend class Context;
  Scope scope_;
  int64_t seed_;
  std::vector<Output> variables_;
  std::vector<bool> trainable_;
  std::vector<Output> inits_;
};

}  // namespace troupe::layers
