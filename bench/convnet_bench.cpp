// Training step time of the four convnets of the TensorFlow paper's Table 1 (AlexNet, Overfeat,
// VGG-A, GoogLeNet) on synthetic data: each step runs the forward pass, the backward pass and
// an SGD update of every variable. The images and labels are variables on the device,
// initialised once, so a step reads no input from the host.
//
// FLOP rule: 2 x multiply-adds of every Conv2D, Conv2DBackpropInput, Conv2DBackpropFilter and
// MatMul node the training step runs (its pruned graph), shapes from shape inference; other
// ops (bias, ReLU, pooling, concat, softmax, the update) are not counted. The first
// convolution has no input gradient, so a step counts about 3x the forward FLOPs less that.
#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "actors/session.hpp"
#include "apps/cli_checks.hpp"
#include "bench/flags.hpp"
#include "devices/cpu_threads.hpp"
#include "devices/device.hpp"
#include "graph/prune.hpp"
#include "ops/all.hpp"
#include "ops/kernel.hpp"
#include "ops/layers/convnets.hpp"

namespace troupe::bench {
namespace {

struct Args : CommonFlags {
  std::string model = "alexnet";
  int batch = 16;
  std::string device = "cpu";
};

void add_options(CLI::App& app, Args& a) {
  add_common_flags(app, a, /*traced=*/true);
  app.add_option("--model", a.model, "the convnet")->check(CLI::IsMember({"alexnet", "overfeat", "vgg", "googlenet"}));
  app.add_option("--batch", a.batch, "images per step")->check(troupe::cli::positive);
  app.add_option("--device", a.device,
                 "where the step runs (gpu is refused while the model has ops without a GPU kernel: today every op)")
      ->check(CLI::IsMember({"cpu", "gpu"}));
}

// 2 x multiply-adds of the convolutions and matrix products among `needed` nodes.
double step_flops(const Graph& g, const std::vector<bool>& needed) {
  double flops = 0;
  for (int id = 0; id < g.size(); ++id) {
    if (!needed[id]) continue;
    const Node& n = g.node(id);
    auto input_shape = [&](int i) -> const PartialShape& {
      return g.node(n.inputs[i].node).output_shapes[n.inputs[i].port];
    };
    if (n.op == "Conv2D" || n.op == "Conv2DBackpropInput" || n.op == "Conv2DBackpropFilter") {
      // The forward convolution's output (Conv2D's output, the backprops' incoming gradient)
      // times the filter's C x KH x KW.
      const PartialShape& out = n.op == "Conv2D" ? n.output_shapes[0] : input_shape(2);
      const PartialShape& f = input_shape(1);
      flops += 2.0 * double(out.num_elements()) * double(f.dim(1) * f.dim(2) * f.dim(3));
    } else if (n.op == "MatMul") {
      bool ta = get_attr_or<bool>(n.attrs, "transpose_a", false);
      const PartialShape& a = input_shape(0);
      flops += 2.0 * double(n.output_shapes[0].num_elements()) * double(a.dim(ta ? 0 : 1));
    }
  }
  return flops;
}

double max_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return double(u.ru_maxrss) * 1024.0;
}

}  // namespace

int convnet_main(int argc, char** argv) {
  Args a;
  CLI::App app{"troupe-bench convnet: training steps of the benchmark convnets"};
  add_options(app, a);
  if (auto done = parse_command_line(app, argc, argv)) return *done;
  if (a.steps < 1) fail(ErrorCode::invalid_argument, "--steps must be positive");
  const auto& info = layers::convnet_info(a.model);
  const auto& registry = DeviceRegistry::instance();
  auto root = Scope::root().with_device(a.device == "gpu" ? "/device:GPU:0" : registry.cpu().name());
  const Shape image_shape{a.batch, 3, info.image_size, info.image_size};
  auto images = ops::variable(root.with_op_name("images"), image_shape, DType::float32, {.trainable = false});
  auto labels = ops::variable(root.with_op_name("labels"), Shape{a.batch}, DType::int32, {.trainable = false});
  auto init_data = ops::group(
      root.with_op_name("init_data"),
      {ops::assign(root, images, ops::random_uniform(root, image_shape, DType::float32, 0.0, 1.0, {.seed = 1})),
       ops::assign(root, labels,
                   ops::cast(root,
                             ops::random_uniform(root, Shape{a.batch}, DType::float32, 0.0,
                                                 double(info.classes) - 0.5, {.seed = 2}),
                             DType::int32))});
  layers::Sequential model(root, /*seed=*/1);
  layers::add_convnet(model, a.model);
  auto logits = model(images, layers::Mode::training);
  auto loss = model.loss(logits, labels);
  Node* train = Optimizer::sgd(0.01).minimize(root, loss);

  const Graph& g = root.graph();
  const double flops = step_flops(g, needed_nodes(g, {}, {Endpoint{loss.node()->id, loss.port()}}, {train->id}));
  const Device* device = &registry.cpu();
  if (a.device == "gpu") {
    // Soft placement would run every op without a GPU kernel on the CPU while this reported a
    // GPU: refused instead, naming the first such op.
    for (int id = 0; id < g.size(); ++id) {
      const Node& n = g.node(id);
      if (KernelRegistry::global().has(n.op, DeviceType::cpu) && !KernelRegistry::global().has(n.op, DeviceType::gpu))
        fail(ErrorCode::unimplemented,
             "--device gpu: op {} ({}) has no GPU kernel, and Troupe has no GPU kernels yet: the convnets run on the "
             "CPU (--device cpu)",
             n.op, n.describe());
    }
    if (registry.gpu_count() == 0) fail(ErrorCode::unavailable, "--device gpu: {}", registry.gpu_status());
    device = registry.matching(DeviceSpec::parse("/device:GPU:0")).front();
  }

  SessionOptions options;
  options.threads = a.threads;
  a.apply_trace(options, /*first_timed=*/2 + a.warmup);  // run 1 initializes, then the warm-up
  Session session(root, options);
  session.run({}, {}, {model.initializer(), init_data});
  session.prepare({}, {loss}, {train});
  device->allocator().reset_peak();

  for (int i = 0; i < a.warmup; ++i) session.run({}, {loss}, {train});
  std::vector<double> ms;
  float last_loss = 0;
  for (int i = 0; i < a.steps; ++i) {
    auto start = std::chrono::steady_clock::now();
    last_loss = session.run({}, {loss}, {train})[0].scalar_value<float>();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  if (!std::isfinite(last_loss)) fail(ErrorCode::aborted, "the loss is {} after {} steps", last_loss, a.steps);
  const double worst = *std::max_element(ms.begin(), ms.end());
  // Moved, not copied: GCC 12 warned of a copy's delete here (-Wfree-nonheap-object, a false
  // positive), in every build.
  const auto [median, min] = summarize(std::move(ms));
  const double images_per_s = a.batch / (median / 1000.0);
  const double gflops = flops / (median / 1000.0) / 1e9;
  const double peak_mib = double(device->allocator().peak_bytes()) / (1 << 20);
  const double rss_mib = max_rss_bytes() / (1 << 20);
  const int threads = a.threads > 0 ? a.threads : usable_cores();
  if (a.json) {
    std::printf("{\"system\":\"troupe\",\"model\":\"%s\",\"batch\":%d,\"device\":\"%s\",\"device_name\":\"%s\","
                "\"threads\":%d,\"parameters\":%lld,\"steps\":%d,\"median_ms\":%.2f,\"min_ms\":%.2f,\"max_ms\":%.2f,"
                "\"images_per_s\":%.1f,\"step_gflop\":%.2f,\"gflops\":%.1f,\"peak_device_mib\":%.0f,"
                "\"max_rss_mib\":%.0f,\"loss\":%.4f}\n",
                a.model.c_str(), a.batch, a.device.c_str(), device->description().c_str(), threads,
                (long long)model.num_parameters(), a.steps, median, min, worst, images_per_s, flops / 1e9, gflops,
                peak_mib, rss_mib, double(last_loss));
  } else {
    std::printf("%s, batch %d, on %s (%s), %d threads\n", info.description.c_str(), a.batch, device->name().c_str(),
                device->description().c_str(), threads);
    std::printf("  parameters        %lld\n", (long long)model.num_parameters());
    std::printf("  step (%d timed)   median %.1f ms, min %.1f ms, max %.1f ms\n", a.steps, median, min, worst);
    std::printf("  throughput        %.1f images/s\n", images_per_s);
    std::printf("  compute           %.1f GFLOP per step, %.1f GFLOP/s (conv and matmul, forward and backward)\n",
                flops / 1e9, gflops);
    std::printf("  memory            peak %.0f MiB on the device, max RSS %.0f MiB\n", peak_mib, rss_mib);
    std::printf("  loss              %.4f\n", double(last_loss));
  }
  return 0;
}

}  // namespace troupe::bench
