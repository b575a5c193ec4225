// Optimizers: each update rule against a scalar reference over several steps, training through
// a Session, the global step, learning-rate schedules and initializers.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

// The textbook rules, one element at a time, in double.
struct Reference {
  OptimizerSpec s;
  double a = 0, b = 0;  // slots
  int64_t t = 0;
  double step(double v, double g, double lr) {
    ++t;
    switch (s.kind) {
      case OptimizerKind::sgd: return v - lr * g;
      case OptimizerKind::momentum:
        a = s.momentum * a + g;
        return v - (s.nesterov ? lr * (g + s.momentum * a) : lr * a);
      case OptimizerKind::adagrad:
        if (t == 1) a = s.initial_accumulator;
        a += g * g;
        return v - lr * g / std::sqrt(a);
      case OptimizerKind::adadelta: {
        a = s.rho * a + (1 - s.rho) * g * g;
        double u = std::sqrt(b + s.epsilon) / std::sqrt(a + s.epsilon) * g;
        b = s.rho * b + (1 - s.rho) * u * u;
        return v - lr * u;
      }
      case OptimizerKind::rmsprop:
        a = s.rho * a + (1 - s.rho) * g * g;
        b = s.momentum * b + lr * g / std::sqrt(a + s.epsilon);
        return v - b;
      case OptimizerKind::adam: {
        a = s.beta1 * a + (1 - s.beta1) * g;
        b = s.beta2 * b + (1 - s.beta2) * g * g;
        double rate = lr * std::sqrt(1 - std::pow(s.beta2, double(t))) / (1 - std::pow(s.beta1, double(t)));
        return v - rate * a / (std::sqrt(b) + s.epsilon);
      }
    }
    return v;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(every_update_rule_matches_a_scalar_reference_over_five_steps) {
  std::vector<Optimizer> all = {Optimizer::sgd(0.1),          Optimizer::momentum(0.1, 0.9),
                                Optimizer::momentum(0.1, 0.9, true), Optimizer::adagrad(0.1),
                                Optimizer::adadelta(1.0),     Optimizer::rmsprop(0.01, 0.9, 0.5),
                                Optimizer::adam(0.01)};
  std::mt19937 rng(3);
  std::normal_distribution<double> normal;
  for (auto& opt : all) {
    BOOST_TEST_CONTEXT(opt.spec().name() << (opt.spec().nesterov ? " (nesterov)" : "")) {
      const int n = 6;
      Tensor var(DType::float64, Shape{n});
      std::vector<Reference> ref(n, Reference{opt.spec()});
      std::vector<double> want(n);
      for (int i = 0; i < n; ++i) want[i] = var.data<double>()[i] = normal(rng);
      std::vector<Tensor> slots;
      for (int k = 0; k < opt.spec().num_slots(); ++k) slots.push_back(Tensor::zeros(DType::float64, {n}));
      if (opt.spec().kind == OptimizerKind::adagrad)
        std::fill_n(slots[0].data<double>(), n, opt.spec().initial_accumulator);
      for (int step = 1; step <= 5; ++step) {
        Tensor grad(DType::float64, Shape{n});
        for (int i = 0; i < n; ++i) grad.data<double>()[i] = normal(rng);
        apply_optimizer(opt.spec(), var, slots, grad, opt.spec().kind == OptimizerKind::adadelta ? 1.0 : 0.05, step);
        for (int i = 0; i < n; ++i)
          want[i] = ref[i].step(want[i], grad.data<double>()[i], opt.spec().kind == OptimizerKind::adadelta ? 1.0 : 0.05);
      }
      for (int i = 0; i < n; ++i) BOOST_TEST(std::abs(var.data<double>()[i] - want[i]) <= 1e-12, "element " << i);
    }
  }
}

// A variable split over parameter servers must train as it does whole: every element's update
// the same bits whichever part of a slice (the vectorized body or the remainder) it falls in. A
// float32 vector of 1,000 updated whole, and as parts of 3, 501 and 496 elements, five steps;
// the parts are also updated by the OpenMP team's slices (apply_optimizer_in_parallel).
BOOST_AUTO_TEST_CASE(a_float32_update_gives_the_same_bits_whole_and_split_into_parts) {
  std::vector<Optimizer> all = {Optimizer::sgd(0.1),          Optimizer::momentum(0.1, 0.9),
                                Optimizer::momentum(0.1, 0.9, true), Optimizer::adagrad(0.1),
                                Optimizer::adadelta(1.0),     Optimizer::rmsprop(0.01, 0.9, 0.5),
                                Optimizer::adam(0.01)};
  const std::vector<int64_t> parts = {3, 501, 496};
  const int64_t n = 1000;
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  for (auto& opt : all) {
    BOOST_TEST_CONTEXT(opt.spec().name() << (opt.spec().nesterov ? " (nesterov)" : "")) {
      const OptimizerSpec& spec = opt.spec();
      auto fresh_slots = [&](int64_t size) {
        std::vector<Tensor> slots;
        for (int k = 0; k < spec.num_slots(); ++k) {
          slots.push_back(Tensor::zeros(DType::float32, {size}));
          if (spec.kind == OptimizerKind::adagrad)
            std::fill_n(slots.back().data<float>(), size, float(spec.initial_accumulator));
        }
        return slots;
      };
      Tensor whole(DType::float32, Shape{n});
      for (int64_t i = 0; i < n; ++i) whole.data<float>()[i] = normal(rng);
      std::vector<Tensor> whole_slots = fresh_slots(n);
      std::vector<Tensor> split;
      std::vector<std::vector<Tensor>> split_slots;
      for (int64_t at = 0, k = 0; k < int64_t(parts.size()); at += parts[std::size_t(k)], ++k) {
        split.push_back(Tensor::from_vector<float>(
            std::vector<float>(whole.data<float>() + at, whole.data<float>() + at + parts[std::size_t(k)]),
            {parts[std::size_t(k)]}));
        split_slots.push_back(fresh_slots(parts[std::size_t(k)]));
      }
      for (int step = 1; step <= 5; ++step) {
        Tensor grad(DType::float32, Shape{n});
        for (int64_t i = 0; i < n; ++i) grad.data<float>()[i] = normal(rng);
        const double lr = spec.kind == OptimizerKind::adadelta ? 1.0 : 0.05;
        apply_optimizer(spec, whole, whole_slots, grad, lr, step);
        for (int64_t at = 0, k = 0; k < int64_t(parts.size()); at += parts[std::size_t(k)], ++k) {
          const int64_t size = parts[std::size_t(k)];
          Tensor g = Tensor::from_vector<float>(std::vector<float>(grad.data<float>() + at, grad.data<float>() + at + size), {size});
          if (k == 1) apply_optimizer_in_parallel(spec, split[std::size_t(k)], split_slots[std::size_t(k)], g, lr, step);
          else apply_optimizer(spec, split[std::size_t(k)], split_slots[std::size_t(k)], g, lr, step);
        }
      }
      int64_t mismatched = 0;
      for (int64_t at = 0, k = 0; k < int64_t(parts.size()); at += parts[std::size_t(k)], ++k)
        for (int64_t i = 0; i < parts[std::size_t(k)]; ++i)
          mismatched += whole.data<float>()[at + i] != split[std::size_t(k)].data<float>()[i];
      BOOST_TEST(mismatched == 0, mismatched << " of " << n << " elements differ");
    }
  }
}

BOOST_AUTO_TEST_CASE(sgd_in_a_session_takes_the_exact_first_step_and_converges) {
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("w"), Shape{}, DType::float32);
  auto init = ops::assign(root, w, ops::constant(root, 0.0f));
  auto loss = ops::square(root, ops::sub(root, w, ops::constant(root, 3.0f)));  // (w - 3)^2
  auto gs = ops::global_step(root);
  auto train = Optimizer::sgd(0.1).minimize(root, loss, {}, gs.value);
  Session s(root);
  s.run({}, {}, {init, gs.init});
  s.run({}, {}, {train});
  BOOST_TEST(s.run({w})[0].scalar_value<float>() == 0.6f);  // 0 - 0.1 * 2 * (0 - 3)
  for (int i = 0; i < 60; ++i) s.run({}, {}, {train});
  BOOST_TEST(std::abs(s.run({w})[0].scalar_value<float>() - 3.0f) < 1e-4f);
  BOOST_TEST(s.run({gs.value})[0].scalar_value<int64_t>() == 61);
}

BOOST_AUTO_TEST_CASE(adam_fits_a_linear_regression) {
  auto root = Scope::root();
  std::mt19937 rng(5);
  std::normal_distribution<float> normal;
  std::vector<float> xs(64 * 3), ys(64);
  for (int i = 0; i < 64; ++i) {
    for (int j = 0; j < 3; ++j) xs[i * 3 + j] = normal(rng);
    ys[i] = 2 * xs[i * 3] - 1 * xs[i * 3 + 1] + 0.5f * xs[i * 3 + 2] + 0.25f;
  }
  auto x = ops::constant<float>(root, xs, {64, 3});
  auto y = ops::constant<float>(root, ys, {64, 1});
  auto w = ops::variable(root.with_op_name("w"), {3, 1}, DType::float32);
  auto b = ops::variable(root.with_op_name("b"), {1}, DType::float32);
  auto init = ops::group(root, {ops::assign(root, w, ops::zeros_like(root, ops::constant<float>(root, {0, 0, 0}, {3, 1}))),
                                ops::assign(root, b, ops::constant<float>(root, {0}, {1}))});
  auto loss = ops::mean(root, ops::square(root, ops::sub(root, ops::add(root, ops::matmul(root, x, w), b), y)));
  auto train = Optimizer::adam(0.05).minimize(root, loss);
  Session s(root);
  s.run({}, {}, {init});
  float first = s.run({loss})[0].scalar_value<float>();
  for (int i = 0; i < 400; ++i) s.run({}, {}, {train});
  float last = s.run({loss})[0].scalar_value<float>();
  BOOST_TEST(last < 1e-4f * first, "loss " << first << " -> " << last);
  auto wv = s.run({w})[0].to_vector<float>();
  BOOST_TEST(std::abs(wv[0] - 2) < 1e-2);
  BOOST_TEST(std::abs(wv[1] + 1) < 1e-2);
}

BOOST_AUTO_TEST_CASE(learning_rate_schedules_decay_with_the_global_step) {
  auto root = Scope::root();
  auto step = ops::placeholder(root, DType::int64, Shape{});
  auto expo = ops::exponential_decay(root, 0.1, step, 10, 0.5);
  auto stair = ops::exponential_decay(root, 0.1, step, 10, 0.5, true);
  auto stepped = ops::step_decay(root, 1.0, step, 3, 0.1);
  Session s(root);
  auto at = [&](int64_t k) { return s.run({{step, Tensor::scalar(k)}}, {expo, stair, stepped}); };
  auto v = at(15);
  BOOST_TEST(std::abs(v[0].scalar_value<float>() - 0.1f * std::pow(0.5f, 1.5f)) < 1e-7f);
  BOOST_TEST(std::abs(v[1].scalar_value<float>() - 0.05f) < 1e-7f);
  BOOST_TEST(std::abs(v[2].scalar_value<float>() - 0.00001f) < 1e-9f);  // floor(15/3) = 5
  BOOST_TEST(at(0)[2].scalar_value<float>() == 1.0f);
}

BOOST_AUTO_TEST_CASE(a_schedule_drives_the_update) {
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("w"), Shape{}, DType::float32);
  auto gs = ops::global_step(root);
  auto loss = ops::mul(root, w, ops::constant(root, 1.0f));  // gradient 1
  auto lr = ops::step_decay(root, 1.0, gs.value, 1, 0.5);    // 1, 0.5, 0.25, ...
  auto train = Optimizer::sgd(lr).minimize(root, loss, {}, gs.value);
  Session s(root);
  s.run({}, {}, {ops::assign(root, w, ops::constant(root, 0.0f)), gs.init});
  for (int i = 0; i < 3; ++i) s.run({}, {}, {train});
  BOOST_TEST(s.run({w})[0].scalar_value<float>() == -1.75f);
}

BOOST_AUTO_TEST_CASE(an_update_of_an_uninitialised_variable_fails_naming_it) {
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("weights"), Shape{2}, DType::float32);
  auto train = Optimizer::momentum(0.1, 0.9).minimize(root, ops::sum(root, ops::square(root, w)));
  Session s(root);
  auto m = error_of([&] { s.run({}, {}, {train}); }, ErrorCode::failed_precondition);
  BOOST_TEST(contains(m, "weights"), m);
  BOOST_TEST(contains(m, "not initialised"), m);
}

BOOST_AUTO_TEST_CASE(minimizing_a_loss_that_no_variable_affects_is_refused) {
  auto root = Scope::root();
  ops::variable(root.with_op_name("w"), Shape{2}, DType::float32);
  auto loss = ops::sum(root, ops::constant<float>(root, {1, 2}, {2}));
  auto m = error_of([&] { Optimizer::sgd(0.1).minimize(root, loss); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "no variable receives a gradient"), m);
}

BOOST_AUTO_TEST_CASE(minimizing_a_model_whose_only_variable_is_an_integer_says_it_is_not_floating_point) {
  auto root = Scope::root();
  auto counts = ops::variable(root.with_op_name("counts"), Shape{2}, DType::int32);
  auto loss = ops::sum(root, counts);
  auto m = error_of([&] { Optimizer::sgd(0.1).minimize(root, loss); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "not floating point"), m);
  BOOST_TEST(contains(m, "'counts' (int32)"), m);
  auto named = error_of([&] { Optimizer::sgd(0.1).minimize(root, loss, {counts}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(named, "variable 'counts' is int32"), named);
}

BOOST_AUTO_TEST_CASE(a_learning_rate_that_is_not_a_float_scalar_is_refused_naming_it) {
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("w"), Shape{}, DType::float32);
  auto lr = ops::constant<int32_t>(root.with_op_name("rate"), {1, 2}, {2});
  auto m = error_of([&] { Optimizer::momentum(lr, 0.9).minimize(root, ops::square(root, w)); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "learning rate must be a floating-point scalar"), m);
  BOOST_TEST(contains(m, "rate"), m);
}
