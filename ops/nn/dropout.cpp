#include "ops/nn/dropout.hpp"

#include <random>

#include "graph/gradients.hpp"
#include "ops/kernel.hpp"
#include "ops/math/elementwise.hpp"
#include "ops/random_seeds.hpp"

namespace troupe {
namespace {

// Outputs: y, and the scale applied to each element (0 or 1 / (1 - rate)) for the gradient.
TROUPE_REGISTER_OP(OpDef{
    .name = "Dropout",
    .num_inputs = -1,
    .num_outputs = 2,
    .stateful = true,
    .shape_fn = [](InferenceContext& c) {
      if (c.num_inputs() < 1 || c.num_inputs() > 2) c.error("takes x and an optional counter, got {} inputs", c.num_inputs());
      if (c.num_inputs() == 2) check_counter_input(c, 1);
      DType t = c.input_type(0);
      if (t != DType::float32 && t != DType::float64) c.error("takes float32 or float64, got {}", name_of(t));
      double rate = c.attr<double>("rate");
      if (!(rate >= 0 && rate < 1)) c.error("rate must be in [0, 1), got {}", rate);
      c.set_output(0, t, c.input_shape(0));
      c.set_output(1, t, c.input_shape(0));
    },
    .required_attrs = {"rate"}});

class DropoutKernel final : public OpKernel {
 public:
  explicit DropoutKernel(const Node& n)
      : rate_(get_attr<double>(n.attrs, "rate", n.name)),
        training_(get_attr_or<bool>(n.attrs, "training", true)),
        seeds_(RandomSeeds::of(n)) {
    generator_.seed(seeds_.seed);
  }
  void compute(KernelContext& ctx) override {
    // With a counter, this run's mask depends on (seed, counter) alone (ops/random_seeds.hpp).
    if (ctx.num_inputs() == 2) seeds_.seed_generator(generator_, counter_value(ctx, 1));
    const Tensor& x = ctx.input(0);
    auto run = [&](auto zero) {
      using T = decltype(zero);
      const int64_t n = x.num_elements();
      const T* px = x.data<T>();
      T* py = ctx.allocate_output(0, x.dtype(), x.shape()).template data<T>();
      T* pm = ctx.allocate_output(1, x.dtype(), x.shape()).template data<T>();
      const T keep_scale = T(1) / T(1 - rate_);
      const uint64_t threshold = uint64_t(rate_ * 18446744073709551616.0);  // rate * 2^64
      for (int64_t i = 0; i < n; ++i) {
        T m = !training_ || rate_ == 0 ? T(1) : (generator_() >= threshold ? keep_scale : T(0));
        pm[i] = m;
        py[i] = px[i] * m;
      }
    };
    if (x.dtype() == DType::float32) run(float{});
    else if (x.dtype() == DType::float64) run(double{});
    else fail(ErrorCode::invalid_argument, "Dropout takes float32 or float64, got {}", x.describe());
  }

 private:
  double rate_;
  bool training_;
  RandomSeeds seeds_;
  std::mt19937_64 generator_;
};
TROUPE_REGISTER_KERNEL("Dropout", DeviceType::cpu, DropoutKernel);

TROUPE_REGISTER_GRADIENT("Dropout", [](const Scope& s, const Node& n, const std::vector<Output>& g) {
  std::vector<Output> grads{ops::mul(s, g[0], output_of(s, n, 1))};
  grads.resize(n.inputs.size());  // none for the counter
  return grads;
});

}  // namespace

Output ops::dropout(const Scope& scope, Output x, double rate, DropoutOptions options) {
  std::vector<Output> inputs{x};
  if (options.counter) inputs.push_back(options.counter);
  return &scope.add("Dropout", inputs,
                    {{"rate", rate}, {"seed", options.seed}, {"training", options.training}});
}

}  // namespace troupe
