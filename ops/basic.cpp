#include "ops/basic.hpp"

#include "graph/gradients.hpp"
#include "ops/kernel.hpp"

namespace troupe {
namespace {

TROUPE_REGISTER_OP(OpDef{
    .name = "Const",
    .shape_fn = [](InferenceContext& c) {
      auto& v = c.attr<Tensor>("value");
      c.set_output(0, v.dtype(), v.shape());
    },
    .required_attrs = {"value"}});

TROUPE_REGISTER_OP(OpDef{
    .name = "Placeholder",
    .stateful = true,
    .shape_fn = [](InferenceContext& c) {
      c.set_output(0, c.attr<DType>("dtype"), c.attr_or<PartialShape>("shape", PartialShape::unknown()));
    },
    .required_attrs = {"dtype"}});

TROUPE_REGISTER_OP(OpDef{.name = "Identity", .num_inputs = 1, .shape_fn = shape_fns::unchanged});

TROUPE_REGISTER_OP(OpDef{.name = "NoOp", .num_outputs = 0, .shape_fn = shape_fns::no_outputs});

TROUPE_REGISTER_GRADIENT("Identity", [](const Scope&, const Node&, const std::vector<Output>& g) {
  return std::vector<Output>{g[0]};
});

class ConstKernel final : public OpKernel {
 public:
  explicit ConstKernel(const Node& node) : value_(get_attr<Tensor>(node.attrs, "value", node.name)) {}
  void compute(KernelContext& ctx) override { ctx.set_output(0, value_); }

 private:
  Tensor value_;
};
TROUPE_REGISTER_KERNEL("Const", DeviceType::cpu, ConstKernel);

// Reached only if a placeholder runs unfed, which pruning refuses before a step starts.
class PlaceholderKernel final : public OpKernel {
 public:
  explicit PlaceholderKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    fail(ErrorCode::invalid_argument, "placeholder '{}' must be fed", ctx.node().name);
  }
};
TROUPE_REGISTER_KERNEL("Placeholder", DeviceType::cpu, PlaceholderKernel);

class IdentityKernel final : public OpKernel {
 public:
  explicit IdentityKernel(const Node&) {}
  void compute(KernelContext& ctx) override { ctx.set_output(0, ctx.input(0)); }
};
TROUPE_REGISTER_KERNEL("Identity", DeviceType::cpu, IdentityKernel);
// _Arg (graph/prune.cpp) receives its feed as input 0 from the step actor.
TROUPE_REGISTER_KERNEL("_Arg", DeviceType::cpu, IdentityKernel);

// _Send and _Recv: graph/partition.hpp puts a pair on each edge between two devices (one per
// tensor per destination), with the same rendezvous key {send_device, recv_device,
// tensor_name}. The value travels from the Send's actor to the Recv's as a message with its
// tag, so a transfer inside a loop keeps its frame and iteration. A Send has no outputs in its
// graph and a Recv no inputs: each partition stands alone. The executor carries both out
// itself (actors/executor/send_node.hpp, recv_node.hpp), without a kernel.
TROUPE_REGISTER_OP(OpDef{.name = "_Send",
                         .num_inputs = 1,
                         .num_outputs = 0,
                         .stateful = true,
                         .shape_fn = [](InferenceContext&) {},
                         .required_attrs = {"send_device", "recv_device", "tensor_name"}});
TROUPE_REGISTER_OP(OpDef{.name = "_Recv",
                         .num_inputs = 0,
                         .stateful = true,
                         .shape_fn = [](InferenceContext& c) {
                           c.set_output(0, c.attr<DType>("dtype"), c.attr<PartialShape>("shape"));
                         },
                         .required_attrs = {"send_device", "recv_device", "tensor_name", "dtype", "shape"}});

class NoOpKernel final : public OpKernel {
 public:
  explicit NoOpKernel(const Node&) {}
  void compute(KernelContext&) override {}
};
TROUPE_REGISTER_KERNEL("NoOp", DeviceType::cpu, NoOpKernel);

}  // namespace

namespace ops {

Output constant(const Scope& scope, const Tensor& value) {
  TROUPE_CHECK_ARG(value.is_initialized(), "constant needs an initialised tensor");
  TROUPE_CHECK_ARG(value.host_accessible(), "constant value must be in host memory, not on {}",
                   value.device_name());
  return &scope.add("Const", {}, {{"value", value.copy()}});
}

Output placeholder(const Scope& scope, DType dtype, PartialShape shape) {
  return &scope.add("Placeholder", {}, {{"dtype", dtype}, {"shape", std::move(shape)}});
}

Output identity(const Scope& scope, Output x) { return &scope.add("Identity", {x}); }

Node* no_op(const Scope& scope) { return &scope.add("NoOp", {}); }

Node* group(const Scope& scope, const std::vector<Output>& deps) {
  return no_op(scope.with_control_dependencies(deps));
}

}  // namespace ops
}  // namespace troupe
