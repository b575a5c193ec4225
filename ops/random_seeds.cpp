#include "ops/random_seeds.hpp"

namespace troupe {

RandomSeeds RandomSeeds::of(const Node& node) {
  RandomSeeds s{uint64_t(get_attr_or<int64_t>(node.attrs, "seed", 0)),
                uint64_t(get_attr_or<int64_t>(node.attrs, "seed2", 0))};
  if (s.seed == 0 && s.seed2 == 0) {
    std::random_device rd;
    s.seed = (uint64_t(rd()) << 32) | rd();
  }
  return s;
}

void RandomSeeds::seed_generator(std::mt19937_64& generator) const {
  std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(seed2), uint32_t(seed2 >> 32)};
  generator.seed(seq);
}

void RandomSeeds::seed_generator(std::mt19937_64& generator, int64_t counter) const {
  const auto c = uint64_t(counter);
  // A seventh word marks the counted form, so that no counter repeats the uncounted sequence.
  std::seed_seq seq{uint32_t(seed), uint32_t(seed >> 32), uint32_t(seed2), uint32_t(seed2 >> 32),
                    uint32_t(c),    uint32_t(c >> 32),    0x636f756eu};
  generator.seed(seq);
}

int64_t counter_value(const KernelContext& ctx, int index) {
  const Tensor& t = ctx.input(index);
  if (t.dtype() != DType::int64 || t.num_elements() != 1)
    fail(ErrorCode::invalid_argument, "{} '{}': the counter must be an int64 scalar, got {}", ctx.node().op,
         ctx.node().name, t.describe());
  return t.data<int64_t>()[0];
}

void check_counter_input(InferenceContext& c, int index) {
  if (c.input_type(index) != DType::int64 || (c.input_shape(index).rank_known() && c.input_shape(index).rank() != 0))
    c.error("the counter (input {}) must be an int64 scalar, got {} {}", index, name_of(c.input_type(index)),
            c.input_shape(index).to_string());
}

std::vector<Output> counter_inputs(const Output& counter) {
  if (!counter) return {};
  return {counter};
}

}  // namespace troupe
