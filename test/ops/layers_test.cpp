// The layers API: parameter counts, shared variables between modes, initializer statistics,
// and an MLP that learns a small synthetic problem.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "ops/layers/layers.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

BOOST_AUTO_TEST_CASE(an_mlp_784_256_256_10_has_the_reference_parameter_count) {
  auto root = Scope::root();
  layers::Sequential model(root, 1);
  model.add(layers::Dense{.units = 256, .activation = layers::Activation::relu})
      .add(layers::Dense{.units = 256, .activation = layers::Activation::relu})
      .add(layers::Dense{.units = 10});
  auto x = ops::placeholder(root, DType::float32, {-1, 784});
  auto logits = model(x, layers::Mode::training);
  BOOST_TEST(logits.shape().to_string() == "[?,10]");
  BOOST_TEST(model.num_parameters() == 784 * 256 + 256 + 256 * 256 + 256 + 256 * 10 + 10);
  BOOST_TEST(model.variables().size() == 6u);
  // An inference graph beside it shares the variables.
  model(x, layers::Mode::inference);
  BOOST_TEST(model.variables().size() == 6u);
}

BOOST_AUTO_TEST_CASE(initializers_have_the_stated_ranges_and_spreads) {
  auto root = Scope::root();
  auto glorot = ops::initial_value(root, ops::Initializer::glorot_uniform(), {300, 200}, DType::float32, 5);
  auto he = ops::initial_value(root, ops::Initializer::he_normal(), {64, 32, 3, 3}, DType::float32, 6);
  auto zeros = ops::initial_value(root, ops::Initializer::zeros(), {7}, DType::float32, 0);
  auto half = ops::initial_value(root, ops::Initializer::constant(0.5), {2, 2}, DType::float64, 0);
  Session s(root);
  auto out = s.run({glorot, he, zeros, half});
  double limit = std::sqrt(6.0 / 500), sq = 0, mean = 0;
  for (float v : out[0].to_vector<float>()) BOOST_TEST(std::abs(v) <= limit);
  auto hv = out[1].to_vector<float>();
  for (float v : hv) mean += v, sq += double(v) * v;
  mean /= double(hv.size());
  double sd = std::sqrt(sq / double(hv.size()) - mean * mean), want = std::sqrt(2.0 / (32 * 9));
  // 18,432 samples: the sample standard deviation is within 3% of sigma with margin.
  BOOST_TEST(std::abs(sd - want) < 0.03 * want, "he_normal sd " << sd << " vs " << want);
  BOOST_TEST(out[2].to_vector<float>() == std::vector<float>(7, 0.0f), boost::test_tools::per_element());
  BOOST_TEST(out[3].to_vector<double>() == std::vector<double>(4, 0.5), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(dropout_is_active_in_training_only) {
  auto root = Scope::root();
  layers::Sequential model(root, 3);
  model.add(layers::Dropout{.rate = 0.5});
  auto x = ops::constant(root, Tensor::from_vector<float>(std::vector<float>(1000, 1.0f), {1, 1000}));
  auto train = model(x, layers::Mode::training);
  auto infer = model(x, layers::Mode::inference);
  Session s(root);
  auto out = s.run({train, infer});
  auto t = out[0].to_vector<float>();
  BOOST_TEST(std::count(t.begin(), t.end(), 0.0f) > 300);
  auto i = out[1].to_vector<float>();
  BOOST_TEST(std::count(i.begin(), i.end(), 1.0f) == 1000);
}

BOOST_AUTO_TEST_CASE(an_mlp_learns_a_synthetic_classification_problem) {
  // Three Gaussian blobs in 4 dimensions; a 4-16-3 MLP with momentum separates them.
  std::mt19937 rng(12);
  std::normal_distribution<float> noise(0, 0.3f);
  const int n = 300;
  std::vector<float> xs(n * 4);
  std::vector<int32_t> ys(n);
  float centers[3][4] = {{1, 0, 0, 1}, {-1, 1, 0, 0}, {0, -1, 1, -1}};
  for (int i = 0; i < n; ++i) {
    ys[i] = i % 3;
    for (int j = 0; j < 4; ++j) xs[i * 4 + j] = centers[ys[i]][j] + noise(rng);
  }
  auto root = Scope::root();
  auto x = ops::constant<float>(root, xs, {n, 4});
  auto y = ops::constant<int32_t>(root, ys, {n});
  layers::Sequential model(root, 42);
  model.add(layers::Dense{.units = 16, .activation = layers::Activation::tanh}).add(layers::Dense{.units = 3});
  auto logits = model(x, layers::Mode::training);
  auto loss = model.loss(logits, y);
  auto acc = ops::accuracy(root, model(x, layers::Mode::inference), y);
  auto train = Optimizer::momentum(0.1, 0.9).minimize(root, loss);
  Session s(root);
  s.run({}, {}, {model.initializer()});
  float first = s.run({loss})[0].scalar_value<float>();
  for (int i = 0; i < 100; ++i) s.run({}, {}, {train});
  auto out = s.run({loss, acc});
  BOOST_TEST(out[0].scalar_value<float>() < 0.2f * first, "loss " << first << " -> " << out[0].scalar_value<float>());
  BOOST_TEST(out[1].scalar_value<float>() > 0.95f);
}

BOOST_AUTO_TEST_CASE(a_layer_that_does_not_fit_its_input_is_refused_naming_the_layer) {
  auto root = Scope::root();
  layers::Sequential model(root);
  model.add(layers::Dense{.units = 4});
  auto x = ops::placeholder(root, DType::float32, {2, 3, 4});
  auto m = error_of([&] { model(x, layers::Mode::training); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "layer 0 (dense)"), m);
  BOOST_TEST(contains(m, "[2,3,4]"), m);
}

BOOST_AUTO_TEST_CASE(the_lenet_cnn_has_the_reference_parameter_count_and_output_shape) {
  auto root = Scope::root();
  layers::Sequential model(root, 1);
  using layers::Activation;
  model.add(layers::Conv2D{.filters = 32, .kernel = 5, .activation = Activation::relu})
      .add(layers::MaxPool2D{.size = 2})
      .add(layers::Conv2D{.filters = 64, .kernel = 5, .activation = Activation::relu})
      .add(layers::MaxPool2D{.size = 2})
      .add(layers::Flatten{})
      .add(layers::Dense{.units = 1024, .activation = Activation::relu})
      .add(layers::Dense{.units = 10});
  auto x = ops::placeholder(root, DType::float32, {-1, 1, 28, 28});
  auto logits = model(x, layers::Mode::training);
  BOOST_TEST(logits.shape().to_string() == "[?,10]");
  // conv1 32*1*25+32, conv2 64*32*25+64, dense 3136*1024+1024, 1024*10+10
  BOOST_TEST(model.num_parameters() == 832 + 51264 + 3212288 + 10250);
  Session s(root);
  s.run({}, {}, {model.initializer()});
  auto out = s.run({{x, Tensor::zeros(DType::float32, {3, 1, 28, 28})}}, {logits});
  BOOST_TEST(out[0].shape().to_string() == "[3,10]");
}

BOOST_AUTO_TEST_CASE(batch_norm_layers_move_their_averages_in_training_and_use_them_in_inference) {
  auto root = Scope::root();
  layers::Sequential model(root, 1);
  model.add(layers::BatchNorm{.momentum = 0.5, .epsilon = 1e-3});
  auto x = ops::placeholder(root, DType::float32, {-1, 2, 3, 3});
  auto train_y = model(x, layers::Mode::training);
  auto infer_y = model(x, layers::Mode::inference);
  // gamma, beta, moving mean, moving variance; only gamma and beta are trained.
  BOOST_TEST(model.variables().size() == 4u);
  BOOST_TEST(ops::trainable_variables(root.graph()).size() == 2u);
  // Channel 0 holds 1..36 scaled by 0.1 over a batch of 2, channel 1 the constant 5.
  Tensor xv(DType::float32, {2, 2, 3, 3});
  std::vector<double> ch0;
  for (int n = 0; n < 2; ++n)
    for (int i = 0; i < 9; ++i) {
      float v = 0.1f * float(n * 9 + i + 1);
      xv.data<float>()[(n * 2 + 0) * 9 + i] = v;
      xv.data<float>()[(n * 2 + 1) * 9 + i] = 5.0f;
      ch0.push_back(v);
    }
  double mean = 0, var = 0;
  for (double v : ch0) mean += v / 18;
  for (double v : ch0) var += (v - mean) * (v - mean) / 17;  // unbiased, as the moving average takes it
  Session s(root);
  s.run({}, {}, {model.initializer()});
  auto y = s.run({{x, xv}}, {train_y})[0];
  BOOST_TEST(std::abs(y.data<float>()[0] - (0.1 - mean) / std::sqrt(var * 17 / 18 + 1e-3)) < 1e-4);
  BOOST_TEST(std::abs(y.data<float>()[9]) < 1e-4);  // a constant channel normalises to 0
  auto moving = s.run({model.variables()[2], model.variables()[3]});
  BOOST_TEST(std::abs(moving[0].data<float>()[0] - 0.5 * mean) < 1e-5);
  BOOST_TEST(std::abs(moving[0].data<float>()[1] - 2.5) < 1e-5);
  BOOST_TEST(std::abs(moving[1].data<float>()[0] - (0.5 + 0.5 * var)) < 1e-4);
  BOOST_TEST(std::abs(moving[1].data<float>()[1] - 0.5) < 1e-5);
  // Inference normalises with the moving averages, and does not move them.
  auto z = s.run({{x, xv}}, {infer_y})[0];
  BOOST_TEST(std::abs(z.data<float>()[9] - (5 - 2.5) / std::sqrt(0.5 + 1e-3)) < 1e-4);
  auto again = s.run({model.variables()[2]})[0];
  BOOST_TEST(std::abs(again.data<float>()[1] - 2.5) < 1e-5);
}

BOOST_AUTO_TEST_CASE(a_cnn_with_batch_norm_and_average_pooling_trains_on_a_synthetic_problem) {
  // Class 1 images are brighter in their top half: a conv + batch norm + pooling model separates
  // them within a few dozen steps.
  auto root = Scope::root();
  layers::Sequential model(root, 3);
  using layers::Activation;
  model.add(layers::Conv2D{.filters = 4, .kernel = 3, .use_bias = false})
      .add(layers::BatchNorm{})
      .add(layers::Act{.activation = Activation::relu})
      .add(layers::AvgPool2D{.size = 2})
      .add(layers::Flatten{})
      .add(layers::Dense{.units = 2});
  auto x = ops::placeholder(root, DType::float32, {16, 1, 6, 6});
  auto labels = ops::placeholder(root, DType::int32, {16});
  auto loss = model.loss(model(x, layers::Mode::training), labels);
  auto train = Optimizer::momentum(0.05, 0.9).minimize(root, loss);
  std::mt19937 rng(4);
  std::uniform_real_distribution<float> u(0, 1);
  auto batch = [&](Tensor& xs, Tensor& ys) {
    xs = Tensor(DType::float32, {16, 1, 6, 6});
    ys = Tensor(DType::int32, {16});
    for (int n = 0; n < 16; ++n) {
      int label = n % 2;
      ys.data<int32_t>()[n] = label;
      for (int i = 0; i < 36; ++i) xs.data<float>()[n * 36 + i] = u(rng) + (label && i < 18 ? 0.5f : 0.0f);
    }
  };
  Session s(root);
  s.run({}, {}, {model.initializer()});
  Tensor xs, ys;
  float first = 0, last = 0;
  for (int step = 0; step < 60; ++step) {
    batch(xs, ys);
    float l = s.run({{x, xs}, {labels, ys}}, {loss}, {train})[0].scalar_value<float>();
    if (step == 0) first = l;
    last = l;
  }
  BOOST_TEST(last < 0.5f * first, "loss " << first << " -> " << last);
}

BOOST_AUTO_TEST_CASE(global_variables_initializer_initialises_a_layers_model_and_other_variables) {
  auto root = Scope::root();
  layers::Sequential model(root, 1);
  model.add(layers::Dense{.units = 3}).add(layers::BatchNorm{});
  auto x = ops::placeholder(root, DType::float32, {-1, 2});
  auto y = model(x, layers::Mode::inference);
  auto scale = ops::variable(root.with_op_name("scale"), ops::constant(root, 2.0f));
  auto out = ops::mul(root, y, scale);
  Session s(root);
  s.run({}, {}, {ops::global_variables_initializer(root)});
  BOOST_TEST(s.variable_names().size() == 7u);  // kernel, bias, gamma, beta, two moving statistics, scale
  auto r = s.run({{x, Tensor::from_vector<float>({1, 2}, {1, 2})}}, {out})[0];
  BOOST_TEST(r.shape().to_string() == "[1,3]");
}
