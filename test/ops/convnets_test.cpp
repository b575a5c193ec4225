// The four benchmark convnets and the layers they need: parameter counts of the reference
// models, output shapes, inception blocks, and a training step that changes every variable.
#include <boost/test/unit_test.hpp>

#include <cmath>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "ops/layers/convnets.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

struct Built {
  Scope root = Scope::root();
  layers::Sequential model{root, 1};
  Output images, logits;
};

void build(Built& b, const std::string& name, int64_t batch) {
  const auto& info = layers::convnet_info(name);
  layers::add_convnet(b.model, name);
  b.images = ops::placeholder(b.root, DType::float32, {batch, 3, info.image_size, info.image_size});
  b.logits = b.model(b.images, layers::Mode::training);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_four_convnets_have_the_reference_parameter_counts) {
  // torchvision's alexnet and vgg11 (without dropout, which has no parameters), Overfeat fast
  // and GoogLeNet v1 without auxiliary heads, as soumith/convnet-benchmarks define them.
  const std::pair<const char*, int64_t> expected[] = {
      {"alexnet", 61100840}, {"overfeat", 145920872}, {"vgg", 132863336}, {"googlenet", 6998552}};
  for (auto& [name, count] : expected) {
    Built b;
    build(b, name, 2);
    BOOST_TEST_CONTEXT(name) {
      BOOST_TEST(b.model.num_parameters() == count);
      BOOST_TEST(b.logits.shape().to_string() == "[2,1000]");
    }
  }
}

BOOST_AUTO_TEST_CASE(an_inception_block_joins_its_four_branches_along_the_channels) {
  auto root = Scope::root();
  layers::Sequential model(root, 1);
  model.add(layers::Inception{.b1 = 4, .b3_reduce = 3, .b3 = 5, .b5_reduce = 2, .b5 = 6, .pool_proj = 7});
  auto x = ops::placeholder(root, DType::float32, {2, 8, 9, 9});
  auto y = model(x, layers::Mode::training);
  BOOST_TEST(y.shape().to_string() == "[2,22,9,9]");
  // Six convolutions with bias: 1x1 8->4, 1x1 8->3, 3x3 3->5, 1x1 8->2, 5x5 2->6, 1x1 8->7.
  BOOST_TEST(model.num_parameters() ==
             (8 * 4 + 4) + (8 * 3 + 3) + (9 * 3 * 5 + 5) + (8 * 2 + 2) + (25 * 2 * 6 + 6) + (8 * 7 + 7));
  Session s(root);
  s.run({}, {}, {model.initializer()});
  Tensor in = Tensor(DType::float32, {2, 8, 9, 9});
  for (int64_t i = 0; i < in.num_elements(); ++i) in.data<float>()[i] = float(std::sin(double(i)));
  Tensor out = s.run({{x, in}}, {y}, {})[0];
  bool all_relu = true;
  for (int64_t i = 0; i < out.num_elements(); ++i) all_relu = all_relu && out.data<float>()[i] >= 0;
  BOOST_TEST(all_relu);
}

BOOST_AUTO_TEST_CASE(an_inception_block_with_a_missing_branch_is_refused) {
  auto root = Scope::root();
  layers::Sequential model(root, 1);
  model.add(layers::Inception{.b1 = 4, .b3_reduce = 3, .b3 = 5, .b5_reduce = 0, .b5 = 6, .pool_proj = 7});
  auto x = ops::placeholder(root, DType::float32, {2, 8, 9, 9});
  auto e = error_of([&] { model(x, layers::Mode::training); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(e, "layer 0 (inception)"));
  BOOST_TEST(contains(e, "every branch"));
}

BOOST_AUTO_TEST_CASE(a_conv_pad_without_explicit_padding_is_refused) {
  auto root = Scope::root();
  layers::Sequential model(root, 1);
  model.add(layers::Conv2D{.filters = 4, .kernel = 3, .padding = "SAME", .pad = 1});
  auto x = ops::placeholder(root, DType::float32, {2, 3, 8, 8});
  auto e = error_of([&] { model(x, layers::Mode::training); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(e, "layer 0 (conv2d)"));
  BOOST_TEST(contains(e, "EXPLICIT"));
}

BOOST_AUTO_TEST_CASE(explicit_conv_padding_pads_every_side) {
  auto root = Scope::root();
  layers::Sequential model(root, 1);
  model.add(layers::Conv2D{.filters = 4, .kernel = 11, .stride = 4, .padding = "EXPLICIT", .pad = 2});
  auto x = ops::placeholder(root, DType::float32, {2, 3, 224, 224});
  BOOST_TEST(model(x, layers::Mode::training).shape().to_string() == "[2,4,55,55]");  // AlexNet's conv1
}

BOOST_AUTO_TEST_CASE(an_unknown_convnet_is_refused_naming_the_known_ones) {
  auto e = error_of([] { layers::convnet_info("resnet"); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(e, "resnet"));
  BOOST_TEST(contains(e, "googlenet"));
}

BOOST_AUTO_TEST_CASE(googlenet_training_steps_move_every_weight_and_lower_the_loss) {
  // Every branch of every inception block takes part in the backward pass: a branch the
  // gradient did not reach would keep its weights.
  Built b;
  build(b, "googlenet", 2);
  auto labels = ops::constant(b.root, std::vector<int32_t>{3, 997}, Shape{2});
  auto loss = b.model.loss(b.logits, labels);
  auto train = Optimizer::sgd(0.01).minimize(b.root, loss);
  Session s(b.root);
  s.run({}, {}, {b.model.initializer()});
  Tensor in(DType::float32, {2, 3, 224, 224});
  for (int64_t i = 0; i < in.num_elements(); ++i) in.data<float>()[i] = float((i * 7919) % 255) / 255.0f;
  std::vector<TensorName> weights;
  for (auto& v : b.model.variables())
    if (v.shape().rank() == 4 || v.shape().rank() == 2) weights.push_back(v);
  BOOST_TEST(weights.size() == 58u);  // 57 convolutions and the classifier
  auto before = s.run(weights);
  float first = 0, last = 0;
  for (int step = 0; step < 4; ++step) {
    last = s.run({{b.images, in}}, {loss}, {train})[0].scalar_value<float>();
    if (step == 0) first = last;
  }
  BOOST_TEST(std::isfinite(last));
  BOOST_TEST(last < first, "loss " << first << " -> " << last);
  auto after = s.run(weights);
  for (std::size_t i = 0; i < weights.size(); ++i) {
    bool same = true;
    for (int64_t k = 0; k < before[i].num_elements() && same; ++k)
      same = before[i].data<float>()[k] == after[i].data<float>()[k];
    BOOST_TEST(!same, weights[i].name << " did not change");
  }
}
