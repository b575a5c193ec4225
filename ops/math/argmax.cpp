#include "ops/math/argmax.hpp"

#include "graph/gradients.hpp"
#include "ops/all.hpp"
#include "ops/kernel.hpp"

namespace troupe {
namespace {

int64_t normalise_axis(int64_t axis, int rank) { return axis < 0 ? axis + rank : axis; }

TROUPE_REGISTER_OP(OpDef{
    .name = "ArgMax",
    .num_inputs = 1,
    .shape_fn = [](InferenceContext& c) {
      if (c.input_type(0) == DType::boolean) c.error("dtype bool is not supported");
      auto& in = c.input_shape(0);
      if (!in.rank_known()) {
        c.set_output(0, DType::int64, PartialShape::unknown());
        return;
      }
      int64_t axis = normalise_axis(c.attr<int64_t>("axis"), in.rank());
      if (axis < 0 || axis >= in.rank()) c.error("axis {} is out of range for {}", c.attr<int64_t>("axis"), in.to_string());
      std::vector<int64_t> dims;
      for (int d = 0; d < in.rank(); ++d)
        if (d != axis) dims.push_back(in.dim(d));
      c.set_output(0, DType::int64, PartialShape::from_dims(dims));
    },
    .required_attrs = {"axis"}});

class ArgMaxKernel final : public OpKernel {
 public:
  explicit ArgMaxKernel(const Node& n) : axis_(get_attr<int64_t>(n.attrs, "axis", n.name)) {}
  void compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    const Shape& s = x.shape();
    int64_t axis = normalise_axis(axis_, s.rank());
    if (axis < 0 || axis >= s.rank())
      fail(ErrorCode::invalid_argument, "axis {} is out of range for {}", axis_, x.describe());
    int64_t outer = 1, inner = 1, n = s[int(axis)];
    Shape out;
    for (int d = 0; d < s.rank(); ++d) {
      if (d < axis) outer *= s[d];
      if (d > axis) inner *= s[d];
      if (d != axis) out.push_back(s[d]);
    }
    if (n == 0) fail(ErrorCode::invalid_argument, "ArgMax over an empty axis of {}", x.describe());
    int64_t* po = ctx.allocate_output(0, DType::int64, out).data<int64_t>();
    visit_dtype(x.dtype(), [&](auto zero) {
      using T = decltype(zero);
      using C = std::conditional_t<std::is_same_v<T, half>, float, T>;
      const T* px = x.data<T>();
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t i = 0; i < inner; ++i) {
          const T* base = px + o * n * inner + i;
          int64_t best = 0;
          for (int64_t k = 1; k < n; ++k)
            if (C(base[k * inner]) > C(base[best * inner])) best = k;
          po[o * inner + i] = best;
        }
    });
  }

 private:
  int64_t axis_;
};
TROUPE_REGISTER_KERNEL("ArgMax", DeviceType::cpu, ArgMaxKernel);
const bool no_gradient = (GradientRegistry::global().add_none("ArgMax"), true);

}  // namespace

namespace ops {

Output argmax(const Scope& scope, Output x, int64_t axis) {
  return &scope.add("ArgMax", {x}, {{"axis", axis}});
}

Output accuracy(const Scope& scope, Output logits, Output labels) {
  Scope s = scope.sub("accuracy");
  auto predicted = argmax(s, logits, -1);
  auto truth = labels.dtype() == DType::int64 ? labels : cast(s, labels, DType::int64);
  return mean(s, cast(s, equal(s, predicted, truth), DType::float32));
}

}  // namespace ops
}  // namespace troupe
