#pragma once
// Symbolic gradients (TensorFlow whitepaper §4.1): gradients(ys, xs) adds to the graph the
// nodes that compute d(sum of ys)/d(x) for each x. It walks the nodes on paths from the xs to
// the ys in reverse topological order, sums the partial gradients that reach each output, and
// calls each op's gradient function, registered next to the op (TROUPE_REGISTER_GRADIENT).
#include <functional>
#include <string>
#include <vector>

#include "graph/scope.hpp"

namespace troupe {

// Given the node and the gradient of each of its outputs (an empty Output where no gradient
// reaches that output... filled with zeros before the call), returns the gradient of each data
// input, or an empty Output for an input that gets none (an integer index, a comparison).
using GradientFunction = std::function<std::vector<Output>(
    const Scope& scope, const Node& node, const std::vector<Output>& grad_outputs)>;

// The gradient of a whole while loop (ops/control/while_loop.cpp registers it; graph/ knows no
// loops). Called once per loop, with one of its Exit nodes and the gradient reaching each
// Exit's value (empty where none does); returns gradients for endpoints outside the loop
// (the loop variables' initial values, the values used inside it).
using LoopGradientFunction = std::function<std::vector<std::pair<Endpoint, Output>>(
    const Scope& scope, const Node& exit, const std::function<Output(const Node& exit)>& grad_of_exit)>;

class GradientRegistry {
 public:
  void set_loop_gradient(LoopGradientFunction fn) { loop_gradient_ = std::move(fn); }
  const LoopGradientFunction* loop_gradient() const { return loop_gradient_ ? &loop_gradient_ : nullptr; }
  static GradientRegistry& global();
  void add(const std::string& op, GradientFunction fn);
  const GradientFunction* find(const std::string& op) const;
  // Marks an op as having no gradient (comparisons, random ops): paths through it end.
  void add_none(const std::string& op);
  bool has_none(const std::string& op) const;

 private:
  std::vector<std::pair<std::string, GradientFunction>> functions_;
  std::vector<std::string> none_;
  LoopGradientFunction loop_gradient_;
};

namespace detail {
struct GradientRegistrar {
  GradientRegistrar(const std::string& op, GradientFunction fn) {
    GradientRegistry::global().add(op, std::move(fn));
  }
};
}  // namespace detail

#define TROUPE_REGISTER_GRADIENT(op, ...)                                                  \
  static const ::troupe::detail::GradientRegistrar TROUPE_CONCAT(gradient_registrar_,     \
                                                                 __COUNTER__)(op, __VA_ARGS__)

// Within a gradient function: the Output feeding data input i of node, and output p of node.
Output input_of(const Scope& scope, const Node& node, int i);
Output output_of(const Scope& scope, const Node& node, int p = 0);

// d(sum of ys)/dx for each x, built under scope.sub("gradients"). grad_ys, if given, holds
// one tensor per y to start from (default: ones shaped like y). An x that no y depends on gets
// an empty Output. Throws when a path from an x to a y goes through an op with no registered
// gradient, naming that node.
// stop_at_xs: paths end at the xs (what lies before them is not walked), as a loop body's
// gradient needs: its xs are the iteration's inputs.
struct GradientOptions {
  bool stop_at_xs = false;
};
std::vector<Output> gradients(const Scope& scope, const std::vector<Output>& ys,
                              const std::vector<Output>& xs,
                              const std::vector<Output>& grad_ys = {}, GradientOptions options = {});

}  // namespace troupe
