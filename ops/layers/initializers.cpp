#include "ops/layers/initializers.hpp"

#include <cmath>

#include "ops/all.hpp"

namespace troupe::ops {

Fans fans_of(const Shape& s) {
  if (s.rank() == 0) return {1, 1};
  if (s.rank() == 1) return {double(s[0]), double(s[0])};
  if (s.rank() == 2) return {double(s[0]), double(s[1])};
  double field = 1;
  for (int d = 2; d < s.rank(); ++d) field *= double(s[d]);
  return {double(s[1]) * field, double(s[0]) * field};
}

Output initial_value(const Scope& scope, const Initializer& init, Shape shape, DType dtype, int64_t seed) {
  Fans f = fans_of(shape);
  switch (init.kind) {
    case Initializer::Kind::glorot_uniform: {
      double limit = std::sqrt(6.0 / (f.in + f.out));
      return random_uniform(scope, shape, dtype, -limit, limit, {.seed = seed});
    }
    case Initializer::Kind::he_normal:
      return random_normal(scope, shape, dtype, 0.0, std::sqrt(2.0 / f.in), {.seed = seed});
    case Initializer::Kind::zeros:
    case Initializer::Kind::constant: {
      double v = init.kind == Initializer::Kind::zeros ? 0.0 : init.value;
      return fill(scope, shape, constant(scope, dtype == DType::float64 ? Tensor::scalar(v) : Tensor::scalar(float(v))));
    }
  }
  fail(ErrorCode::invalid_argument, "unknown initializer");
}

}  // namespace troupe::ops
