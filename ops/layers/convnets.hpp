#pragma once
// The four convnets of the TensorFlow paper's Table 1 (soumith/convnet-benchmarks), built with
// the layers API on NCHW float32 images, 1000 classes, no dropout and no auxiliary heads:
//   alexnet    AlexNet, "one weird trick" variant, 224x224, 61,100,840 parameters
//   overfeat   Overfeat fast, 231x231, 145,920,872 parameters
//   vgg        OxfordNet VGG-A (VGG-11), 224x224, 132,863,336 parameters
//   googlenet  GoogLeNet v1 (inception blocks joined by Concat, 5x5 branches), 224x224,
//              6,998,552 parameters
// Every convolution and every hidden dense layer has a bias and a ReLU.
#include <string>
#include <vector>

#include "ops/layers/layers.hpp"

namespace troupe::layers {

struct ConvnetInfo {
  std::string name;
  std::string description;
  int64_t image_size = 0;  // images are [N, 3, image_size, image_size]
  int64_t classes = 1000;
  void (*add_layers)(Sequential& model) = nullptr;  // what add_convnet calls
};

const std::vector<ConvnetInfo>& convnets();
// The named model's description; throws invalid_argument naming the known models.
const ConvnetInfo& convnet_info(const std::string& name);
// Adds the named model's layers to an empty model; its logits are [N, classes].
void add_convnet(Sequential& model, const std::string& name);

}  // namespace troupe::layers
