#include "ops/layers/convnets.hpp"

#include "core/error.hpp"

namespace troupe::layers {
namespace {

Conv2D conv(int64_t filters, int64_t kernel, int64_t stride = 1, std::string padding = "SAME", int64_t pad = 0) {
  return Conv2D{.filters = filters,
                .kernel = kernel,
                .stride = stride,
                .padding = std::move(padding),
                .pad = pad,
                .activation = Activation::relu};
}
Dense hidden(int64_t units) { return Dense{.units = units, .activation = Activation::relu}; }

void alexnet(Sequential& m) {
  m.add(conv(64, 11, 4, "EXPLICIT", 2)).add(MaxPool2D{.size = 3, .stride = 2});  // 55 -> 27
  m.add(conv(192, 5)).add(MaxPool2D{.size = 3, .stride = 2});                      // 27 -> 13
  m.add(conv(384, 3)).add(conv(256, 3)).add(conv(256, 3)).add(MaxPool2D{.size = 3, .stride = 2});  // 13 -> 6
  m.add(Flatten{}).add(hidden(4096)).add(hidden(4096)).add(Dense{.units = 1000});
}

void overfeat(Sequential& m) {
  m.add(conv(96, 11, 4, "VALID")).add(MaxPool2D{.size = 2});  // 231 -> 56 -> 28
  m.add(conv(256, 5, 1, "VALID")).add(MaxPool2D{.size = 2});  // 28 -> 24 -> 12
  m.add(conv(512, 3)).add(conv(1024, 3)).add(conv(1024, 3)).add(MaxPool2D{.size = 2});  // 12 -> 6
  m.add(Flatten{}).add(hidden(3072)).add(hidden(4096)).add(Dense{.units = 1000});
}

void vgg_a(Sequential& m) {
  m.add(conv(64, 3)).add(MaxPool2D{.size = 2});
  m.add(conv(128, 3)).add(MaxPool2D{.size = 2});
  m.add(conv(256, 3)).add(conv(256, 3)).add(MaxPool2D{.size = 2});
  m.add(conv(512, 3)).add(conv(512, 3)).add(MaxPool2D{.size = 2});
  m.add(conv(512, 3)).add(conv(512, 3)).add(MaxPool2D{.size = 2});  // 224 -> 7
  m.add(Flatten{}).add(hidden(4096)).add(hidden(4096)).add(Dense{.units = 1000});
}

void googlenet(Sequential& m) {
  // 3x3/2 max pools with SAME padding: the ceil-mode pools of the reference (112 -> 56 -> 28 ...).
  const MaxPool2D pool{.size = 3, .stride = 2, .padding = "SAME"};
  m.add(conv(64, 7, 2, "EXPLICIT", 3)).add(pool);  // 224 -> 112 -> 56
  m.add(conv(64, 1)).add(conv(192, 3)).add(pool);  // 56 -> 28
  m.add(Inception{64, 96, 128, 16, 32, 32});       // 3a: 256 channels
  m.add(Inception{128, 128, 192, 32, 96, 64});     // 3b: 480
  m.add(pool);                                     // 28 -> 14
  m.add(Inception{192, 96, 208, 16, 48, 64});      // 4a: 512
  m.add(Inception{160, 112, 224, 24, 64, 64});     // 4b: 512
  m.add(Inception{128, 128, 256, 24, 64, 64});     // 4c: 512
  m.add(Inception{112, 144, 288, 32, 64, 64});     // 4d: 528
  m.add(Inception{256, 160, 320, 32, 128, 128});   // 4e: 832
  m.add(pool);                                     // 14 -> 7
  m.add(Inception{256, 160, 320, 32, 128, 128});   // 5a: 832
  m.add(Inception{384, 192, 384, 48, 128, 128});   // 5b: 1024
  m.add(AvgPool2D{.size = 7, .stride = 1});        // 7 -> 1
  m.add(Flatten{}).add(Dense{.units = 1000});
}

}  // namespace

const std::vector<ConvnetInfo>& convnets() {
  static const std::vector<ConvnetInfo> all{
      {"alexnet", "AlexNet (one weird trick)", 224, 1000, alexnet},
      {"overfeat", "Overfeat (fast)", 231, 1000, overfeat},
      {"vgg", "OxfordNet VGG-A (VGG-11)", 224, 1000, vgg_a},
      {"googlenet", "GoogLeNet v1", 224, 1000, googlenet},
  };
  return all;
}

const ConvnetInfo& convnet_info(const std::string& name) {
  std::string known;
  for (auto& c : convnets()) {
    if (c.name == name) return c;
    known += (known.empty() ? "" : ", ") + c.name;
  }
  fail(ErrorCode::invalid_argument, "unknown convnet '{}' (known: {})", name, known);
}

void add_convnet(Sequential& model, const std::string& name) { convnet_info(name).add_layers(model); }

}  // namespace troupe::layers
