#pragma once
// The seeding that the random kernels (ops/random.cpp) and Dropout (ops/nn/dropout.cpp) share:
// the op's seeds (attrs "seed" and "seed2"; both zero: drawn from std::random_device once per
// kernel) and, where the op has one, an int64 scalar counter input from which each run is
// seeded afresh, so that run's numbers depend on (seed, seed2, counter) alone and a run resumed
// from a checkpoint (which holds the counter, e.g. the global step) draws what the
// uninterrupted one drew.
#include <cstdint>
#include <random>
#include <vector>

#include "graph/scope.hpp"
#include "ops/kernel.hpp"

namespace troupe {

struct RandomSeeds {
  uint64_t seed = 0, seed2 = 0;
  static RandomSeeds of(const Node& node);
  // Seeds the generator from (seed, seed2), or from (seed, seed2, counter).
  void seed_generator(std::mt19937_64& generator) const;
  void seed_generator(std::mt19937_64& generator, int64_t counter) const;
};

// The value of input `index`, which the shape function checked to be an int64 scalar.
int64_t counter_value(const KernelContext& ctx, int index);
// In a shape function: refuses an input `index` other than an int64 scalar, naming it.
void check_counter_input(InferenceContext& c, int index);
// The inputs a random op takes for an optional counter: none, or the counter.
std::vector<Output> counter_inputs(const Output& counter);

}  // namespace troupe
