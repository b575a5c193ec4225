// troupe-demo: builds a small graph (a linear model y = x W + b with its variables), runs it
// through a Session, and prints what it computed: the smallest program on the C++ API.
#include <cstdio>
#include <exception>
#include <string>

#include "actors/session.hpp"
#include "devices/device.hpp"
#include "ops/all.hpp"

using namespace troupe;

int main(int argc, char** argv) {
  if (argc > 1) {
    const bool help = std::string(argv[1]) == "--help" || std::string(argv[1]) == "-h";
    std::fprintf(help ? stdout : stderr,
                 "troupe-demo: runs a small linear model (y = x W + b) through a Session and prints its devices and "
                 "values; it takes no options\n");
    return help ? 0 : 2;
  }
  try {
    for (auto& d : DeviceRegistry::instance().devices())
      std::printf("device %s: %s\n", d->name().c_str(), d->description().c_str());
    std::printf("GPU: %s\n", DeviceRegistry::instance().gpu_status().c_str());

    auto root = Scope::root();
    auto x = ops::placeholder(root.with_op_name("x"), DType::float32, {-1, 3});
    auto layer = root.sub("linear");
    auto w = ops::variable(layer.with_op_name("w"), {3, 2}, DType::float32);
    auto b = ops::variable(layer.with_op_name("b"), {2}, DType::float32);
    auto init_w = ops::assign(layer, w, ops::random_normal(layer, {3, 2}, DType::float32, 0, 1, {.seed = 42}));
    auto init_b = ops::assign(layer, b, ops::zeros_like(layer, ops::constant<float>(layer, {0.5f, -0.5f}, {2})));
    auto init = ops::group(root.with_op_name("init"), {init_w, init_b});
    auto y = ops::add(root.with_op_name("y"), ops::matmul(layer, x, w), b);
    auto loss = ops::mean(root.with_op_name("loss"), ops::square(root, y));
    auto step_b = ops::assign_add(root, b, ops::constant<float>(root, {0.25f, 0.25f}, {2}));

    Session session(root);
    session.run({}, {}, {init});
    auto input = Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {2, 3});
    for (int i = 0; i < 3; ++i) {
      auto out = session.run({{x, input}}, {y, loss});
      std::printf("run %d: y = %s, loss = %s\n", i, out[0].to_string().c_str(), out[1].to_string().c_str());
      session.run({}, {}, {step_b});
    }
    try {
      session.run({{x, Tensor::from_vector<float>({1, 2}, {1, 2})}}, {y});
    } catch (const Error& e) {
      std::printf("a bad feed is refused: %s\n", e.what());
    }
    std::printf("variables: ");
    for (auto& n : session.variable_names()) std::printf("%s ", n.c_str());
    std::printf("\n");
    return 0;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-demo: %s\n", e.what());
    return 1;
  }
}
