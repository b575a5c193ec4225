#pragma once
// RandomUniform and RandomNormal. With a nonzero seed (or seed2) the sequence of values over
// successive runs is the same in every session; with both zero it differs each time.
//
// Without a counter the op's generator advances run after run, in the process that runs it: a
// process that restores a checkpoint starts it again from the seeds. With a counter (an int64
// scalar, e.g. ops::global_step's value) each run's values are a function of (seed, seed2,
// counter) alone: the run at step s draws the same values in any session, after any history,
// so training resumed from a checkpoint (which holds the global step) draws what the
// uninterrupted run would have. (With both seeds zero the process draws the seeds, and only
// runs of that process repeat.)
#include "graph/scope.hpp"

namespace troupe::ops {

struct RandomOptions {
  int64_t seed = 0;
  int64_t seed2 = 0;
  Output counter = {};  // int64 scalar; empty: the generator advances per run
};
Output random_uniform(const Scope& scope, Shape shape, DType dtype = DType::float32,
                      double minval = 0.0, double maxval = 1.0, RandomOptions options = {});
Output random_normal(const Scope& scope, Shape shape, DType dtype = DType::float32,
                     double mean = 0.0, double stddev = 1.0, RandomOptions options = {});

}  // namespace troupe::ops
