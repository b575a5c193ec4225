#pragma once
// Optimizers applied where the variable lives. minimize() builds the gradients of a loss and
// one ApplyGradient node per trainable variable; each is one message per step to the
// parameter shard that owns the variable, which updates it (and its slots: momentum,
// accumulators, Adam's moments) in place.
#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "graph/scope.hpp"

namespace troupe {

enum class OptimizerKind { sgd, momentum, adagrad, adadelta, rmsprop, adam };

// The hyper-parameters an update needs besides the learning rate (a graph tensor).
struct OptimizerSpec {
  OptimizerKind kind = OptimizerKind::sgd;
  double momentum = 0.0;         // momentum, rmsprop
  bool nesterov = false;         // momentum
  double initial_accumulator = 0.1;  // adagrad
  double rho = 0.95;             // adadelta; rmsprop's decay
  double beta1 = 0.9, beta2 = 0.999;  // adam
  double epsilon = 1e-8;

  int num_slots() const;
  const char* name() const;  // "momentum", "adam", ...
  // The name of slot k, as a checkpoint saves it ("<variable>/<name()>/<slot_name(k)>"):
  // momentum and adagrad "accumulator"; adadelta "accumulator", "accumulator_update";
  // rmsprop "ms", "mom"; adam "m", "v".
  const char* slot_name(int k) const;
};

// Applies one update in place: var and slots (num_slots() of them, shaped like var, created
// zero-filled (adagrad: initial_accumulator) by the caller on first use). step counts updates
// from 1 (Adam's bias correction). Throws on a dtype or shape mismatch.
void apply_optimizer(const OptimizerSpec& spec, Tensor& var, std::vector<Tensor>& slots,
                     const Tensor& grad, double learning_rate, int64_t step);
// The same update on the calling OpenMP team (run_as_team), each thread a slice.
void apply_optimizer_in_parallel(const OptimizerSpec& spec, Tensor& var, std::vector<Tensor>& slots,
                                 const Tensor& grad, double learning_rate, int64_t step);
// One step on the rows of var that `indices` names (int32 or int64, any shape; a sparse
// gradient, ops/state/embedding.hpp), `values` (indices.shape + var.shape[1:]) their
// gradients; only those rows of var and of the slots change. Duplicate indices have their
// gradients summed first. Throws naming an index out of range or values that do not fit.
void apply_optimizer_to_rows(const OptimizerSpec& spec, Tensor& var, std::vector<Tensor>& slots,
                             const Tensor& values, const Tensor& indices, double learning_rate, int64_t step);
// The spec an ApplyGradient node carries in its attributes.
OptimizerSpec optimizer_spec_of(const Node& node);

namespace ops {

// Variables marked trainable (the default) of the graph.
std::vector<Output> trainable_variables(const Graph& graph);

// A step counter variable (int64 scalar, named "global_step") and its initializer.
struct GlobalStep {
  Output value;
  Node* init;
};
GlobalStep global_step(const Scope& scope);

// learning_rate * decay_rate ^ (step / decay_steps), with the exponent floored if staircase.
Output exponential_decay(const Scope& scope, double learning_rate, Output global_step,
                         double decay_steps, double decay_rate, bool staircase = false);
// learning_rate * factor ^ floor(step / step_size).
Output step_decay(const Scope& scope, double learning_rate, Output global_step, double step_size,
                  double factor);

}  // namespace ops

// An optimizer's learning rate: a number, or a floating-point scalar computed in the graph (a
// schedule such as ops::exponential_decay). There is one, given where the optimizer is made:
// Optimizer::momentum(0.01, 0.9) or Optimizer::momentum(schedule, 0.9).
struct LearningRate {
  LearningRate(double v) : value(v) {}
  LearningRate(Output t) : tensor(t) {}
  double value = 0;
  Output tensor;  // when set, the rate
};

class Optimizer {
 public:
  static Optimizer sgd(LearningRate learning_rate);
  static Optimizer momentum(LearningRate learning_rate, double momentum, bool nesterov = false);
  static Optimizer adagrad(LearningRate learning_rate, double initial_accumulator = 0.1);
  static Optimizer adadelta(LearningRate learning_rate = 1.0, double rho = 0.95, double epsilon = 1e-6);
  static Optimizer rmsprop(LearningRate learning_rate, double decay = 0.9, double momentum = 0.0,
                           double epsilon = 1e-10);
  static Optimizer adam(LearningRate learning_rate = 0.001, double beta1 = 0.9, double beta2 = 0.999,
                        double epsilon = 1e-8);

  // The train op: gradients of loss for `variables` (default: all trainable ones), one update
  // per variable, and, if given, global_step incremented once the updates are done. A
  // variable read only through gathers (ops::embedding_lookup) is updated sparsely: only the
  // rows the step read (ops/state/embedding.hpp).
  Node* minimize(const Scope& scope, Output loss, std::vector<Output> variables = {},
                 Output global_step = {}) const;
  // The same from gradients computed elsewhere, one per variable.
  Node* apply_gradients(const Scope& scope, const std::vector<Output>& grads,
                        const std::vector<Output>& variables, Output global_step = {}) const;

  const OptimizerSpec& spec() const { return spec_; }
  // For optimizers built on this one (SyncReplicasOptimizer). The variables minimize() trains:
  // `given`, or every trainable variable of the graph; throws naming what is wrong (none, or a
  // variable that is not floating point).
  static std::vector<Output> variables_to_train(const Graph& graph, std::vector<Output> given);
  // The learning rate as a graph scalar built under `scope` (a constant, or the schedule);
  // throws when the schedule is no floating-point scalar.
  Output learning_rate_tensor(const Scope& scope) const;
  // The attributes an update node of `variable` carries: the variable's shared name, dtype and
  // shape, and this optimizer's spec (what optimizer_spec_of reads back).
  AttrMap update_attrs(const Node& variable) const;

 private:
  // One variable's update: a dense gradient, or (rows set) the gradients of those rows.
  struct Update {
    Output variable, grad, rows;
  };
  Node* apply(const Scope& scope, const std::vector<Update>& updates, Output global_step) const;

  OptimizerSpec spec_;
  LearningRate learning_rate_ = 0.01;
};

}  // namespace troupe
