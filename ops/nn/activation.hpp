#pragma once
// Activations: Relu, Sigmoid, Tanh, Elu, each with a gradient op that takes the activation's
// output (y), so the backward pass needs no second evaluation of the function.
#include "graph/scope.hpp"

namespace troupe::ops {

Output relu(const Scope& scope, Output x);
Output sigmoid(const Scope& scope, Output x);
Output tanh(const Scope& scope, Output x);
Output elu(const Scope& scope, Output x);  // x > 0 ? x : exp(x) - 1

}  // namespace troupe::ops
