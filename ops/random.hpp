#pragma once
// RandomUniform and RandomNormal. With a nonzero seed (or seed2) the sequence of values over
// successive runs is the same in every session; with both zero it differs each time.
#include "graph/scope.hpp"

namespace troupe::ops {

struct RandomOptions {
  int64_t seed = 0;
  int64_t seed2 = 0;
};
Output random_uniform(const Scope& scope, Shape shape, DType dtype = DType::float32,
                      double minval = 0.0, double maxval = 1.0, RandomOptions options = {});
Output random_normal(const Scope& scope, Shape shape, DType dtype = DType::float32,
                     double mean = 0.0, double stddev = 1.0, RandomOptions options = {});

}  // namespace troupe::ops
