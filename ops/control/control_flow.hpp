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

}  // namespace troupe::ops
