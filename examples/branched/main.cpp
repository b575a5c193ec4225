// A small residual CNN built with the layers API's functional way: layers are objects that own
// their variables, called on Outputs in a Context (training or inference); branches are plain
// C++ and are joined by an Add. Trains for a few dozen steps on 256 Fashion-MNIST images (or
// synthetic ones when the data set is not installed), prints the loss, and exits 1 unless it
// fell.
//
//   branched [fashion-mnist dir]
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "ops/data/idx.hpp"
#include "ops/layers/layers.hpp"

using namespace troupe;

namespace {

// conv -> batch norm -> optional ReLU: a layer of one's own, made of two layers. Their
// variables live under this layer's scope; the batch norm's moving averages move whenever a
// training-mode output is computed.
class ConvBn final : public layers::Layer {
 public:
  ConvBn(int64_t filters, bool relu)
      : conv_(layers::Conv2D{.filters = filters, .kernel = 3, .use_bias = false}), relu_(relu) {}
  const char* kind() const override { return "conv_bn"; }

 protected:
  Output build(layers::Context& ctx, Output x) override {
    Output y = bn_(ctx, conv_(ctx, x));
    return relu_ ? ops::relu(ctx.scope(), y) : y;
  }

 private:
  layers::Conv2DLayer conv_;
  layers::BatchNormLayer bn_;  // Keras' defaults: momentum 0.99, epsilon 1e-3
  bool relu_;
};

// relu(x + conv_bn(conv_bn(x))): the identity branch and the convolution branch joined by an Add.
class ResidualBlock final : public layers::Layer {
 public:
  explicit ResidualBlock(int64_t channels) : first_(channels, true), second_(channels, false) {}
  const char* kind() const override { return "residual"; }

 protected:
  Output build(layers::Context& ctx, Output x) override {
    Output branch = second_(ctx, first_(ctx, x));
    return ops::relu(ctx.scope(), add_(ctx, {x, branch}));
  }

 private:
  ConvBn first_, second_;
  layers::AddLayer add_;
};

struct Batches {
  Tensor images;  // float32 [N, 1, 28, 28] in [0, 1]
  Tensor labels;  // int32 [N]
};

// The first n test images of Fashion-MNIST, or n synthetic ones (class k: a bright bar at row 2k).
Batches load(const std::string& dir, int64_t n) {
  Batches b{Tensor(DType::float32, {n, 1, 28, 28}), Tensor(DType::int32, {n})};
  float* x = b.images.data<float>();
  int32_t* y = b.labels.data<int32_t>();
  if (std::filesystem::exists(dir)) {
    auto data = data::fashion_mnist(dir, data::Split::test);
    for (int64_t i = 0; i < n * 784; ++i) x[i] = float(data.images.data<uint8_t>()[i]) / 255.0f;
    for (int64_t i = 0; i < n; ++i) y[i] = data.labels.data<uint8_t>()[i];
    std::printf("Fashion-MNIST from %s\n", dir.c_str());
    return b;
  }
  std::mt19937 rng(3);
  std::uniform_real_distribution<float> noise(0, 0.5f);
  for (int64_t i = 0; i < n; ++i) {
    y[i] = int32_t(i % 10);
    for (int64_t p = 0; p < 784; ++p) x[i * 784 + p] = noise(rng) + (p / 28 / 2 == 1 + y[i] ? 0.5f : 0.0f);
  }
  std::printf("%s not found: synthetic images\n", dir.c_str());
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  const int64_t batch = 64, steps = 40;
  Batches data = load(argc > 1 ? argv[1] : data::kFashionMnistDir, batch * 4);

  auto root = Scope::root();
  layers::Model model(root, /*seed=*/1);
  ConvBn stem(16, true);
  // PyTorch's MaxPool2d(3, stride=2, padding=1): 28 -> 14.
  layers::MaxPool2DLayer pool(layers::MaxPool2D{.size = 3, .stride = 2, .padding = "EXPLICIT", .pad = 1});
  ResidualBlock block1(16), block2(16);
  layers::GlobalAveragePooling2DLayer global_pool;
  layers::DenseLayer classifier(layers::Dense{.units = 10});
  auto net = [&](layers::Context& ctx, Output x) {
    x = pool(ctx, stem(ctx, x));
    x = block2(ctx, block1(ctx, x));
    return classifier(ctx, global_pool(ctx, x));
  };

  auto images = ops::placeholder(root, DType::float32, {batch, 1, 28, 28});
  auto labels = ops::placeholder(root, DType::int32, {batch});
  layers::Context train = model.context(layers::Mode::training);
  auto loss = model.loss(net(train, images), labels);
  // An evaluation graph would be net(model.context(layers::Mode::inference), images): the same
  // variables, batch norm with its moving averages.
  Node* step = Optimizer::adam(0.01).minimize(root, loss);
  std::printf("%lld trainable parameters, %lld moving statistics\n", (long long)model.num_parameters(),
              (long long)model.num_non_trainable_parameters());

  Session session(root);
  session.run({}, {}, {model.initializer()});
  float first = 0, last = 0;
  for (int64_t i = 0; i < steps; ++i) {
    int64_t at = (i % 4) * batch;
    FeedList feeds{{images, data.images.slice(at, at + batch)}, {labels, data.labels.slice(at, at + batch)}};
    last = session.run(feeds, {loss}, {step})[0].scalar_value<float>();
    if (i == 0) first = last;
    if (i % 10 == 0 || i == steps - 1) std::printf("step %2lld  loss %.4f\n", (long long)i, last);
  }
  if (!(last < 0.8f * first)) {
    std::printf("the loss did not fall: %.4f -> %.4f\n", first, last);
    return 1;
  }
  return 0;
}
