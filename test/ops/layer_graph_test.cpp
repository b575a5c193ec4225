// Models that are not a chain: layers called by hand (the functional way), joins (Add,
// Concatenate), a user layer made of a Conv2D and a BatchNorm, GlobalAveragePooling2D, and the
// parameter counts that leave the moving statistics out.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <random>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "ops/layers/layers.hpp"
#include "test/ops/gradient_check.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;
using troupe::testing::rand_f32;

namespace {

// conv -> batch norm -> relu, the unit of a residual network; a layer made of layers.
class ConvBn final : public layers::Layer {
 public:
  ConvBn(int64_t filters, layers::BatchNorm bn = {})
      : conv_(layers::Conv2D{.filters = filters, .kernel = 3, .use_bias = false}), bn_(bn) {}
  const char* kind() const override { return "conv_bn"; }
  layers::Conv2DLayer& conv() { return conv_; }
  layers::BatchNormLayer& bn() { return bn_; }

 protected:
  Output build(layers::Context& ctx, Output x) override { return bn_(ctx, conv_(ctx, x)); }

 private:
  layers::Conv2DLayer conv_;
  layers::BatchNormLayer bn_;
};

// x + conv(tanh(conv(x))): two branches joined by an Add.
struct ResidualBlock {
  layers::Conv2DLayer conv1, conv2;
  layers::AddLayer add;
  explicit ResidualBlock(int64_t channels)
      : conv1(layers::Conv2D{.filters = channels, .kernel = 3, .activation = layers::Activation::tanh}),
        conv2(layers::Conv2D{.filters = channels, .kernel = 3}) {}
  Output operator()(layers::Context& ctx, Output x) { return add(ctx, {x, conv2(ctx, conv1(ctx, x))}); }
};

// Class 1 images are brighter in their top half.
void synthetic_batch(std::mt19937& rng, Tensor& xs, Tensor& ys, int64_t n, int64_t size) {
  std::uniform_real_distribution<float> u(0, 1);
  xs = Tensor(DType::float32, {n, 1, size, size});
  ys = Tensor(DType::int32, {n});
  const int64_t plane = size * size;
  for (int64_t i = 0; i < n; ++i) {
    int label = int(i % 2);
    ys.data<int32_t>()[i] = label;
    for (int64_t j = 0; j < plane; ++j)
      xs.data<float>()[i * plane + j] = u(rng) + (label && j < plane / 2 ? 0.5f : 0.0f);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_residual_cnn_built_the_functional_way_trains_and_its_loss_falls) {
  auto root = Scope::root();
  layers::Model model(root, 5);
  layers::Conv2DLayer stem(layers::Conv2D{.filters = 4, .kernel = 3, .use_bias = false});
  layers::BatchNormLayer stem_bn;
  layers::ActLayer relu(layers::Act{.activation = layers::Activation::relu});
  ResidualBlock block(4);
  layers::GlobalAveragePooling2DLayer pool;
  layers::DenseLayer classifier(layers::Dense{.units = 2});
  auto net = [&](layers::Context& ctx, Output x) {
    x = relu(ctx, stem_bn(ctx, stem(ctx, x)));
    return classifier(ctx, pool(ctx, block(ctx, x)));
  };
  auto x = ops::placeholder(root, DType::float32, {16, 1, 6, 6});
  auto labels = ops::placeholder(root, DType::int32, {16});
  layers::Context train = model.context(layers::Mode::training);
  layers::Context infer = model.context(layers::Mode::inference);
  auto loss = model.loss(net(train, x), labels);
  auto eval_logits = net(infer, x);
  BOOST_TEST(eval_logits.shape().to_string() == "[16,2]");
  // stem 4x1x3x3, batch norm 4+4 (+4+4 statistics), two 4x4x3x3 convolutions with bias, dense 4x2+2.
  BOOST_TEST(model.num_parameters() == 36 + 8 + 2 * (144 + 4) + 10);
  BOOST_TEST(model.num_non_trainable_parameters() == 8);
  BOOST_TEST(model.variables().size() == 11u);  // the inference graph made none
  auto step = Optimizer::momentum(0.05, 0.9).minimize(root, loss);
  Session s(root);
  s.run({}, {}, {model.initializer()});
  std::mt19937 rng(4);
  Tensor xs, ys;
  float first = 0, last = 0;
  for (int i = 0; i < 60; ++i) {
    synthetic_batch(rng, xs, ys, 16, 6);
    float l = s.run({{x, xs}, {labels, ys}}, {loss}, {step})[0].scalar_value<float>();
    if (i == 0) first = l;
    last = l;
  }
  BOOST_TEST(last < 0.5f * first, "loss " << first << " -> " << last);
}

BOOST_AUTO_TEST_CASE(gradients_through_both_branches_of_a_residual_block_match_central_differences) {
  // loss = sum(w * (x + conv2(tanh(conv1(x))))): d loss / d x takes both the identity and the
  // convolution branch; the kernels only the latter. The variables are fed, so that the
  // differences move them. float32: step 1e-2, within 2e-2 relative + 2e-3 absolute.
  auto root = Scope::root();
  layers::Model model(root, 7);
  ResidualBlock block(2);
  auto x = ops::placeholder(root, DType::float32, {1, 2, 4, 4});
  layers::Context ctx = model.context(layers::Mode::training);
  auto y = block(ctx, x);
  auto w = ops::constant(root, rand_f32({1, 2, 4, 4}));
  auto loss = ops::sum(root, ops::mul(root, y, w));
  std::vector<Output> wrt{x, block.conv1.kernel(), block.conv2.kernel(), block.conv1.bias()};
  auto grads = gradients(root, {loss}, wrt);
  Session s(root);
  s.run({}, {}, {model.initializer()});
  FeedList feeds{{x, rand_f32({1, 2, 4, 4})}};
  for (std::size_t i = 1; i < wrt.size(); ++i) feeds.push_back({wrt[i], rand_f32(wrt[i].shape().to_shape(), -0.5, 0.5)});
  std::vector<TensorName> fetches(grads.begin(), grads.end());
  auto analytic = s.run(feeds, fetches);
  const double h = 1e-2;
  for (std::size_t i = 0; i < wrt.size(); ++i) {
    BOOST_TEST_CONTEXT("input " << i << " (" << wrt[i].name() << ")") {
      BOOST_TEST_REQUIRE(analytic[i].shape() == feeds[i].second.shape());
      for (int64_t j = 0; j < feeds[i].second.num_elements(); ++j) {
        auto eval = [&](double delta) {
          FeedList moved = feeds;
          moved[i].second = feeds[i].second.copy();
          moved[i].second.data<float>()[j] += float(delta);
          return double(s.run(moved, {loss})[0].scalar_value<float>());
        };
        double numeric = (eval(h) - eval(-h)) / (2 * h);
        double got = analytic[i].data<float>()[j];
        BOOST_TEST(std::abs(got - numeric) <= 2e-3 + 2e-2 * std::abs(numeric),
                   "element " << j << ": analytic " << got << ", numeric " << numeric);
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(a_user_layer_holding_conv2d_and_batch_norm_shares_its_variables_and_moves_its_statistics) {
  auto root = Scope::root();
  layers::Model model(root, 2);
  ConvBn unit(3, layers::BatchNorm{.momentum = 0.0, .epsilon = 1e-3});  // momentum 0: moving = batch
  auto x = ops::placeholder(root, DType::float32, {4, 2, 6, 6});
  layers::Context train = model.context(layers::Mode::training);
  layers::Context infer = model.context(layers::Mode::inference);
  auto y_train = unit(train, x);
  auto y_infer = unit(infer, x);
  // Its variables live under its own scope, made once.
  BOOST_TEST(unit.path() == "model/conv_bn/");
  BOOST_TEST(unit.conv().path() == "model/conv_bn/conv2d/");
  BOOST_TEST(unit.bn().moving_mean().name() == "model/conv_bn/batch_norm/moving_mean:0");
  BOOST_TEST(model.variables().size() == 5u);  // kernel, gamma, beta, moving mean and variance
  BOOST_TEST(model.trainable_variables().size() == 3u);
  BOOST_TEST(model.non_trainable_variables().size() == 2u);
  BOOST_TEST(ops::trainable_variables(root.graph()).size() == 3u);
  BOOST_TEST(model.num_parameters() == 3 * 2 * 9 + 3 + 3);
  BOOST_TEST(model.num_non_trainable_parameters() == 6);

  Session s(root);
  s.run({}, {}, {model.initializer()});
  auto xv = rand_f32({4, 2, 6, 6});
  auto before = s.run({unit.bn().moving_mean(), unit.bn().moving_variance()});
  BOOST_TEST(before[0].to_vector<float>() == std::vector<float>(3, 0.0f), boost::test_tools::per_element());
  auto t = s.run({{x, xv}}, {y_train})[0];
  auto moving = s.run({unit.bn().moving_mean(), unit.bn().moving_variance()});
  // Training normalised each channel with the batch's mean and biased variance; the moving
  // averages took the batch's mean and unbiased variance (n = 4 * 6 * 6).
  const double n = 144, eps = 1e-3;
  for (int c = 0; c < 3; ++c) {
    double sum = 0;
    for (int b = 0; b < 4; ++b)
      for (int i = 0; i < 36; ++i) sum += t.data<float>()[(b * 3 + c) * 36 + i];
    BOOST_TEST(std::abs(sum / n) < 1e-4, "channel " << c);
    BOOST_TEST(std::abs(moving[1].data<float>()[c] - 1.0f) > 1e-3, "the variance moved, channel " << c);
  }
  // Inference with the same kernel and the moving statistics gives the training output scaled
  // by sqrt((biased + eps) / (unbiased + eps)) per channel.
  auto z = s.run({{x, xv}}, {y_infer})[0];
  for (int c = 0; c < 3; ++c) {
    double unbiased = moving[1].data<float>()[c], biased = unbiased * (n - 1) / n;
    double scale = std::sqrt((biased + eps) / (unbiased + eps));
    for (int b = 0; b < 4; ++b)
      for (int i = 0; i < 36; ++i) {
        int64_t k = (b * 3 + c) * 36 + i;
        BOOST_TEST(std::abs(z.data<float>()[k] - t.data<float>()[k] * scale) < 1e-4, "element " << k);
      }
  }
  auto after = s.run({unit.bn().moving_mean()})[0];  // inference left the statistics alone
  BOOST_TEST(after.to_vector<float>() == moving[0].to_vector<float>(), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(layers_are_named_by_kind_made_unique_or_by_their_own_name) {
  auto root = Scope::root();
  layers::Model model(root);
  layers::Conv2DLayer a(layers::Conv2D{.filters = 2}), b(layers::Conv2D{.filters = 2});
  layers::ConcatenateLayer join;
  join.set_name("join");
  auto x = ops::placeholder(root, DType::float32, {1, 3, 4, 4});
  layers::Context ctx = model.context(layers::Mode::training);
  auto y = join(ctx, {a(ctx, x), b(ctx, x), x});
  BOOST_TEST(y.shape().to_string() == "[1,7,4,4]");
  BOOST_TEST(a.name() == "conv2d");
  BOOST_TEST(b.name() == "conv2d_1");
  BOOST_TEST(b.kernel().name() == "model/conv2d_1/kernel:0");
  BOOST_TEST(join.path() == "model/join/");
  // Called again, a layer reads the same variables.
  a(ctx, x);
  BOOST_TEST(model.variables().size() == 4u);
}

BOOST_AUTO_TEST_CASE(joins_of_inputs_that_do_not_fit_are_refused_naming_the_layer_and_the_shapes) {
  auto root = Scope::root();
  layers::Model model(root);
  layers::Context ctx = model.context(layers::Mode::training);
  auto a = ops::placeholder(root, DType::float32, {2, 3, 4, 4});
  auto b = ops::placeholder(root, DType::float32, {2, 5, 4, 4});
  auto c = ops::placeholder(root, DType::float32, {2, 3, 5, 4});
  layers::AddLayer add;
  auto m = error_of([&] { add(ctx, {a, b}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "layer 'model/add' (add)"), m);
  BOOST_TEST(contains(m, "[2,3,4,4], [2,5,4,4]"), m);
  layers::ConcatenateLayer concat(layers::Concatenate{.axis = 1});
  concat.set_name("merge");
  m = error_of([&] { concat(ctx, {a, b, c}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "layer 'model/merge' (concatenate)"), m);
  BOOST_TEST(contains(m, "input 2"), m);
  BOOST_TEST(contains(m, "[2,3,5,4]"), m);
  BOOST_TEST(concat(ctx, {a, b}).shape().to_string() == "[2,8,4,4]");
  layers::AddLayer lone;
  m = error_of([&] { lone(ctx, a); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "at least 2 inputs"), m);
}

BOOST_AUTO_TEST_CASE(a_layer_of_one_model_is_refused_in_another) {
  auto root = Scope::root();
  layers::Model first(root), second(root);
  layers::DenseLayer dense(layers::Dense{.units = 2});
  auto x = ops::placeholder(root, DType::float32, {1, 3});
  layers::Context a = first.context(layers::Mode::training), b = second.context(layers::Mode::training);
  dense(a, x);
  auto m = error_of([&] { dense(b, x); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "layer 'model/dense' (dense)"), m);
  BOOST_TEST(contains(m, "another model"), m);
}

BOOST_AUTO_TEST_CASE(global_average_pooling_matches_a_naive_mean) {
  auto root = Scope::root();
  layers::Sequential model(root);
  model.add(layers::GlobalAveragePooling2D{});
  auto x = ops::placeholder(root, DType::float32, {2, 3, 5, 4});
  auto y = model(x, layers::Mode::inference);
  BOOST_TEST(y.shape().to_string() == "[2,3]");
  auto xv = rand_f32({2, 3, 5, 4});
  Session s(root);
  auto out = s.run({{x, xv}}, {y})[0];
  for (int nc = 0; nc < 6; ++nc) {
    double sum = 0;
    for (int i = 0; i < 20; ++i) sum += xv.data<float>()[nc * 20 + i];
    BOOST_TEST(std::abs(out.data<float>()[nc] - sum / 20) < 1e-5, "plane " << nc);
  }
}

BOOST_AUTO_TEST_CASE(num_parameters_counts_the_trained_variables_and_leaves_the_statistics_apart) {
  auto root = Scope::root();
  layers::Sequential model(root, 1);
  model.add(layers::Conv2D{.filters = 8, .kernel = 3})
      .add(layers::BatchNorm{})
      .add(layers::GlobalAveragePooling2D{})
      .add(layers::Dense{.units = 10})
      .add(layers::BatchNorm{});
  model(ops::placeholder(root, DType::float32, {-1, 3, 8, 8}), layers::Mode::training);
  BOOST_TEST(model.num_parameters() == (8 * 3 * 9 + 8) + 2 * 8 + (8 * 10 + 10) + 2 * 10);
  BOOST_TEST(model.num_non_trainable_parameters() == 2 * 8 + 2 * 10);
}

BOOST_AUTO_TEST_CASE(pooling_layers_pad_explicitly_and_count_the_padding_as_asked) {
  // A 2x2 input of ones (of minus ones for max), 2x2 windows with stride 2 and one padding on
  // every side: each window holds one input element and three padded ones.
  auto root = Scope::root();
  layers::Model model(root);
  layers::Context ctx = model.context(layers::Mode::inference);
  auto ones = ops::constant(root, Tensor::from_vector<float>({1, 1, 1, 1}, {1, 1, 2, 2}));
  auto minus = ops::constant(root, Tensor::from_vector<float>({-1, -1, -1, -1}, {1, 1, 2, 2}));
  layers::AvgPool2DLayer left_out(layers::AvgPool2D{.size = 2, .padding = "EXPLICIT", .pad = 1});
  layers::AvgPool2DLayer counted(
      layers::AvgPool2D{.size = 2, .padding = "EXPLICIT", .pad = 1, .count_include_pad = true});
  layers::MaxPool2DLayer max(layers::MaxPool2D{.size = 2, .padding = "EXPLICIT", .pad = 1});
  auto a = left_out(ctx, ones), b = counted(ctx, ones), c = max(ctx, minus);
  BOOST_TEST(a.shape().to_string() == "[1,1,2,2]");
  Session s(root);
  auto out = s.run({a, b, c});
  BOOST_TEST(out[0].to_vector<float>() == std::vector<float>(4, 1.0f), boost::test_tools::per_element());
  BOOST_TEST(out[1].to_vector<float>() == std::vector<float>(4, 0.25f), boost::test_tools::per_element());
  BOOST_TEST(out[2].to_vector<float>() == std::vector<float>(4, -1.0f), boost::test_tools::per_element());
  layers::MaxPool2DLayer unpadded(layers::MaxPool2D{.size = 2, .pad = 1});
  auto m = error_of([&] { unpadded(ctx, ones); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "layer 'model/max_pool_1' (max_pool)"), m);
  BOOST_TEST(contains(m, "EXPLICIT"), m);
}
