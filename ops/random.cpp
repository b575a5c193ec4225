#include "ops/random.hpp"

#include <cmath>
#include <random>

#include "ops/kernel.hpp"
#include "ops/random_seeds.hpp"

namespace troupe {
namespace {

void random_shape(InferenceContext& c) {
  if (c.num_inputs() > 1) c.error("takes at most one input (the counter), got {}", c.num_inputs());
  if (c.num_inputs() == 1) check_counter_input(c, 0);
  DType t = c.attr<DType>("dtype");
  if (!is_floating(t)) c.error("dtype must be a floating type, got {}", name_of(t));
  auto& shape = c.attr<PartialShape>("shape");
  if (!shape.fully_defined()) c.error("shape {} must be fully defined", shape.to_string());
  c.set_output(0, t, shape);
}

TROUPE_REGISTER_OP(OpDef{.name = "RandomUniform", .num_inputs = -1, .stateful = true, .shape_fn = random_shape,
                         .required_attrs = {"dtype", "shape"}});
TROUPE_REGISTER_OP(OpDef{.name = "RandomNormal", .num_inputs = -1, .stateful = true, .shape_fn = random_shape,
                         .required_attrs = {"dtype", "shape"}});

// Per-node generator: advances across runs, like TensorFlow's stateful random kernels, unless
// a counter input reseeds it each run from (seed, seed2, counter).
class RandomKernel : public OpKernel {
 public:
  explicit RandomKernel(const Node& node)
      : dtype_(get_attr<DType>(node.attrs, "dtype", node.name)),
        shape_(get_attr<PartialShape>(node.attrs, "shape", node.name).to_shape()),
        seeds_(RandomSeeds::of(node)) {
    seeds_.seed_generator(generator_);
  }

 protected:
  // Called first by compute: with a counter input, this run's values depend on it alone.
  void start_run(KernelContext& ctx) {
    if (ctx.num_inputs() == 0) return;
    seeds_.seed_generator(generator_, counter_value(ctx, 0));
    on_reseed();
  }
  virtual void on_reseed() {}

  double uniform01() { return double(generator_() >> 11) * 0x1.0p-53; }

  template <class F>
  void generate(KernelContext& ctx, F&& next) {
    Tensor& out = ctx.allocate_output(0, dtype_, shape_);
    const int64_t n = out.num_elements();
    visit_dtype(dtype_, [&](auto zero) {
      using T = decltype(zero);
      if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, half>) {
        T* p = out.data<T>();
        for (int64_t i = 0; i < n; ++i) {
          if constexpr (std::is_same_v<T, half>) p[i] = half(float(next()));
          else p[i] = T(next());
        }
      }
    });
  }

  DType dtype_;
  Shape shape_;
  RandomSeeds seeds_;
  std::mt19937_64 generator_;
};

class RandomUniformKernel final : public RandomKernel {
 public:
  explicit RandomUniformKernel(const Node& node)
      : RandomKernel(node),
        min_(get_attr_or<double>(node.attrs, "minval", 0.0)),
        max_(get_attr_or<double>(node.attrs, "maxval", 1.0)) {}
  void compute(KernelContext& ctx) override {
    start_run(ctx);
    generate(ctx, [&] { return min_ + (max_ - min_) * uniform01(); });
    // Rounding to the dtype may carry a draw just below maxval onto maxval; draw those again,
    // so every value lies in [minval, maxval) as documented.
    if (max_ > min_) {
      visit_dtype(dtype_, [&](auto zero) {
        using T = decltype(zero);
        if constexpr (std::is_floating_point_v<T> || std::is_same_v<T, half>) {
          T* p = ctx.output(0).template data<T>();
          const float top = float(T(max_));
          for (int64_t i = 0; i < ctx.output(0).num_elements(); ++i)
            while (float(p[i]) >= top) p[i] = T(min_ + (max_ - min_) * uniform01());
        }
      });
    }
  }

 private:
  double min_, max_;
};
TROUPE_REGISTER_KERNEL("RandomUniform", DeviceType::cpu, RandomUniformKernel);

// Box-Muller: the same numbers on every platform for the same seed.
class RandomNormalKernel final : public RandomKernel {
 public:
  explicit RandomNormalKernel(const Node& node)
      : RandomKernel(node),
        mean_(get_attr_or<double>(node.attrs, "mean", 0.0)),
        stddev_(get_attr_or<double>(node.attrs, "stddev", 1.0)) {}
  void compute(KernelContext& ctx) override {
    start_run(ctx);
    generate(ctx, [&] {
      if (have_spare_) {
        have_spare_ = false;
        return mean_ + stddev_ * spare_;
      }
      double u1 = uniform01(), u2 = uniform01();
      if (u1 < 1e-300) u1 = 1e-300;
      double r = std::sqrt(-2.0 * std::log(u1));
      spare_ = r * std::sin(2.0 * M_PI * u2);
      have_spare_ = true;
      return mean_ + stddev_ * r * std::cos(2.0 * M_PI * u2);
    });
  }

 private:
  void on_reseed() override { have_spare_ = false; }
  double mean_, stddev_;
  double spare_ = 0;
  bool have_spare_ = false;
};
TROUPE_REGISTER_KERNEL("RandomNormal", DeviceType::cpu, RandomNormalKernel);

}  // namespace

namespace ops {

Output random_uniform(const Scope& scope, Shape shape, DType dtype, double minval, double maxval,
                      RandomOptions options) {
  return &scope.add("RandomUniform", counter_inputs(options.counter),
                    {{"shape", PartialShape(shape)}, {"dtype", dtype}, {"minval", minval},
                     {"maxval", maxval}, {"seed", options.seed}, {"seed2", options.seed2}});
}

Output random_normal(const Scope& scope, Shape shape, DType dtype, double mean, double stddev,
                     RandomOptions options) {
  return &scope.add("RandomNormal", counter_inputs(options.counter),
                    {{"shape", PartialShape(shape)}, {"dtype", dtype}, {"mean", mean},
                     {"stddev", stddev}, {"seed", options.seed}, {"seed2", options.seed2}});
}

}  // namespace ops
}  // namespace troupe
