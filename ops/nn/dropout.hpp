#pragma once
// Dropout: in training, keeps each element with probability 1 - rate and scales the kept ones
// by 1 / (1 - rate); in inference, passes x through unchanged.
#include "graph/scope.hpp"

namespace troupe::ops {

struct DropoutOptions {
  int64_t seed = 0;  // nonzero: the same masks in every session
  bool training = true;
  // An int64 scalar such as ops::global_step's value: each run's mask then depends on (seed,
  // counter) alone, so training resumed from a checkpoint draws the masks the uninterrupted run
  // drew (ops/random.hpp). Empty: the generator advances run after run in this process.
  Output counter = {};
};
Output dropout(const Scope& scope, Output x, double rate, DropoutOptions options = {});

}  // namespace troupe::ops
