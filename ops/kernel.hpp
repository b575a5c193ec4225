#pragma once
// The kernel interface. A kernel object is made once per node when an executable is
// instantiated (so it can parse attributes and keep per-node state such as a random
// generator) and computes one step at a time: the node actor that owns it never calls it
// concurrently. Kernels throw troupe::Error; the executor adds the node, op and device.
#include <functional>
#include <initializer_list>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/tensor.hpp"
#include "devices/device.hpp"
#include "graph/graph.hpp"

namespace troupe {

class KernelContext {
 public:
  KernelContext(const Node& node, const Device& device, const Tensor* inputs, int num_inputs,
                Tensor* outputs, int num_outputs, uint64_t* dead_outputs = nullptr)
      : node_(node), device_(device), inputs_(inputs), num_inputs_(num_inputs),
        outputs_(outputs), num_outputs_(num_outputs), dead_outputs_(dead_outputs) {}

  const Node& node() const { return node_; }
  const Device& device() const { return device_; }
  int num_inputs() const { return num_inputs_; }
  const Tensor& input(int i) const { return inputs_[i]; }
  int num_outputs() const { return num_outputs_; }

  Tensor& allocate_output(int i, DType dtype, const Shape& shape) {
    outputs_[i] = Tensor(dtype, shape, device_.allocator());
    return outputs_[i];
  }
  // Output i in the buffer of input `from` where that can be (TensorFlow's
  // forward_input_or_allocate_output), else a fresh one as allocate_output: the input came
  // by message (allow_forwarding()), this firing holds its buffer's only reference, and it
  // has the output's dtype and shape on this device. An elementwise kernel then writes over
  // its operand, in place (its output's data is its input's: the kernel compares the two), and
  // a chain of them (Add, Tanh, Square) goes through one buffer, not one each. Of several
  // candidates (`from`), the first that can be.
  Tensor& forward_or_allocate_output(int i, std::initializer_list<int> from, DType dtype, const Shape& shape) {
    for (int f : from) {
      const Tensor& in = inputs_[f];
      if (f < 64 && (forwardable_ >> f & 1) && in.buffer_use_count() == 1 && in.dtype() == dtype &&
          in.shape() == shape && in.is_on(device_.allocator())) {
        outputs_[i] = in;
        return outputs_[i];
      }
    }
    return allocate_output(i, dtype, shape);
  }
  // The inputs (bit i: input i) that forward_or_allocate_output() may take over: the
  // executor's, those that came by message (never a hoisted constant, which the plan keeps
  // for every firing). None by default.
  void allow_forwarding(uint64_t inputs) { forwardable_ = inputs; }
  void set_output(int i, Tensor t) { outputs_[i] = std::move(t); }
  const Tensor& output(int i) const { return outputs_[i]; }
  // Marks output i as not computed (the untaken port of a Switch): it is sent dead.
  void set_dead(int i) {
    if (!dead_outputs_ || i >= 64) fail(ErrorCode::internal, "output {} cannot be marked dead here", i);
    *dead_outputs_ |= uint64_t(1) << i;
  }

 private:
  const Node& node_;
  const Device& device_;
  const Tensor* inputs_;
  int num_inputs_;
  Tensor* outputs_;
  int num_outputs_;
  uint64_t* dead_outputs_;
  uint64_t forwardable_ = 0;
};

class OpKernel {
 public:
  virtual ~OpKernel() = default;
  virtual void compute(KernelContext& ctx) = 0;
  // True for kernels that run an intra-op team (oneDNN primitives, BLAS): the executor leases
  // them the team's cores (devices/cpu_threads.hpp).
  virtual bool runs_team() const { return false; }
};

using KernelFactory = std::function<std::unique_ptr<OpKernel>(const Node& node)>;

class KernelRegistry {
 public:
  static KernelRegistry& global();
  void add(const std::string& op, DeviceType device, KernelFactory factory);
  bool has(const std::string& op, DeviceType device) const;
  // Throws not_found naming the op and device when no kernel is registered.
  std::unique_ptr<OpKernel> create(const Node& node, DeviceType device) const;

 private:
  // By op, then device: looked up once per node of every graph an executor plans.
  std::unordered_map<std::string, std::vector<std::pair<DeviceType, KernelFactory>>> kernels_;
  const KernelFactory* find(const std::string& op, DeviceType device) const;
};

namespace detail {
struct KernelRegistrar {
  KernelRegistrar(const std::string& op, DeviceType device, KernelFactory factory) {
    KernelRegistry::global().add(op, device, std::move(factory));
  }
};
}  // namespace detail

// TROUPE_REGISTER_KERNEL("Add", DeviceType::cpu, AddKernel): AddKernel(const Node&).
#define TROUPE_REGISTER_KERNEL(op, device, ...)                                          \
  static const ::troupe::detail::KernelRegistrar TROUPE_CONCAT(kernel_registrar_,       \
                                                               __COUNTER__)(            \
      op, device, [](const ::troupe::Node& node) -> std::unique_ptr<::troupe::OpKernel> { \
        return std::make_unique<__VA_ARGS__>(node);                                      \
      })

}  // namespace troupe
