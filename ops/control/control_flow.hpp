#pragma once
// Conditional dataflow (whitepaper §4.4): Switch routes a value to one of two outputs and sends
// the other one dead; Merge forwards the first live input of a tag; nodes whose inputs are dead
// do not run and pass deadness on. cond() builds an if/else from them.
#include <functional>
#include <vector>

#include "graph/scope.hpp"

namespace troupe::ops {

// Outputs {output_false, output_true}: data goes to output_true if pred (a bool scalar) holds.
std::vector<Output> switch_(const Scope& scope, Output data, Output pred);
// Outputs {output, value_index}: the first live input and its index (int32).
std::vector<Output> merge(const Scope& scope, const std::vector<Output>& inputs);

using Branch = std::function<std::vector<Output>(const Scope& scope, const std::vector<Output>& inputs)>;

// if (pred) then_fn(inputs) else else_fn(inputs). Each branch sees `inputs` through a Switch,
// so the untaken branch receives dead values and does not run; each node a branch builds also
// depends on its branch's pivot, so even a branch's constants do not run when untaken. Both
// branches must return the same number of outputs with matching dtypes; the results are
// merged.
std::vector<Output> cond(const Scope& scope, Output pred, const std::vector<Output>& inputs,
                         const Branch& then_fn, const Branch& else_fn);

// The loop primitives (whitepaper §4.4, OSDI'16 §3.4); while_loop() builds loops from them.
// Enter moves `data` into iteration 0 of the child frame `frame_name` (one frame per
// invocation of the loop). A constant Enter (a loop invariant) hands its value to every
// iteration: it takes the loop's LoopCond as a second input, which tells it when the frame
// ends, and a control input from the loop's first Merge, which starts each iteration.
Output enter(const Scope& scope, Output data, const std::string& frame_name, int parallel_iterations);
// Exit(data, pred) returns `data` to the parent frame when the loop ends: its value at the
// iteration whose `pred` (the LoopCond) is false; a dead loop exits dead. The node's output 1
// is the number of iterations that ran (int32).
Output exit(const Scope& scope, Output data, Output pred);
// NextIteration moves `data` to the next iteration of its frame, at most
// `parallel_iterations` ahead of the oldest unfinished one.
Output next_iteration(const Scope& scope, Output data, int parallel_iterations);
// LoopCond: the loop's predicate (a bool scalar), passed through.
Output loop_cond(const Scope& scope, Output pred);

using LoopCondition = std::function<Output(const Scope& scope, const std::vector<Output>& vars)>;

struct WhileOptions {
  // Iterations that may run at once: iteration k starts only when iterations up to
  // k - parallel_iterations have finished.
  int parallel_iterations = 10;
  std::string name = "while";
  // Per loop variable, the shapes it may take across iterations (TensorFlow's
  // shape_invariants): empty, or one per variable. Without them a variable's shape is relaxed
  // to what every iteration can have (start [2] and a body returning [?] give [?]); with them
  // the variable has its invariant's shape, which must cover the value before the loop and the
  // value the body returns, or the loop is refused as it is built.
  std::vector<PartialShape> shape_invariants;
};

// while (cond(vars)) vars = body(vars); returns the final vars. cond returns a bool scalar;
// body returns one Output per loop variable with the same dtype (shapes: see
// WhileOptions::shape_invariants). The
// functions may use any tensor of the graph: values from outside the loop reach every
// iteration as loop invariants, and loops and conds may nest to any depth. Every node cond
// and body build runs once per iteration (each is given a control input from the iteration's
// pivot where it has no other input inside the loop). Control dependencies of `scope`, and
// any on nodes outside the loop, hold back the loop's start instead.
std::vector<Output> while_loop(const Scope& scope, const LoopCondition& cond, const Branch& body,
                               const std::vector<Output>& loop_vars, WhileOptions options = {});

}  // namespace troupe::ops
