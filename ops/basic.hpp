#pragma once
// Const, Placeholder, Identity, NoOp.
#include <vector>

#include "graph/scope.hpp"

namespace troupe::ops {

Output constant(const Scope& scope, const Tensor& value);
template <class T>
Output constant(const Scope& scope, T value) {
  return constant(scope, Tensor::scalar<T>(value));
}
template <class T>
Output constant(const Scope& scope, const std::vector<T>& values, Shape shape) {
  return constant(scope, Tensor::from_vector<T>(values, shape));
}
// A value fed at run time; `shape` may leave dimensions (-1) or the rank unknown.
Output placeholder(const Scope& scope, DType dtype, PartialShape shape = PartialShape::unknown());
Output identity(const Scope& scope, Output x);
// An op that does nothing: a target or a control dependency that groups others.
Node* no_op(const Scope& scope);
Node* group(const Scope& scope, const std::vector<Output>& deps);

}  // namespace troupe::ops
