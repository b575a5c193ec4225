#pragma once
// Initializers: graph ops that produce a variable's first value.
#include "graph/scope.hpp"

namespace troupe::ops {

struct Initializer {
  enum class Kind { glorot_uniform, he_normal, zeros, constant };
  Kind kind = Kind::glorot_uniform;
  double value = 0.0;  // for constant

  static Initializer glorot_uniform() { return {Kind::glorot_uniform}; }
  static Initializer he_normal() { return {Kind::he_normal}; }
  static Initializer zeros() { return {Kind::zeros}; }
  static Initializer constant(double v) { return {Kind::constant, v}; }
};

// fan_in / fan_out of a weight shape: [in, out] for dense kernels, [out, in, kh, kw] (OIHW)
// for convolution filters, the receptive field counted in both.
struct Fans {
  double in, out;
};
Fans fans_of(const Shape& shape);

// Glorot/Xavier uniform: U(-l, l) with l = sqrt(6 / (fan_in + fan_out)).
// He normal: N(0, sqrt(2 / fan_in)) (a plain normal, not TensorFlow's truncated one).
Output initial_value(const Scope& scope, const Initializer& init, Shape shape, DType dtype, int64_t seed);

}  // namespace troupe::ops
