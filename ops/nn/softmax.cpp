#include "ops/nn/softmax.hpp"

#include <algorithm>
#include <cmath>

#include "graph/gradients.hpp"
#include "ops/all.hpp"
#include "ops/kernel.hpp"

namespace troupe {
namespace {

// Rows of the last axis: calls f(row pointer in, row pointer out) per row.
struct Rows {
  int64_t count, width;
  explicit Rows(const Shape& s) {
    if (s.rank() < 1) fail(ErrorCode::invalid_argument, "needs rank >= 1, got a scalar");
    width = s[s.rank() - 1];
    count = width ? s.num_elements() / width : 0;
  }
};

// A row's maximum m and s = sum(exp(x - m)). The kernels use x - m (exact for the largest
// logits) and log s (small) apart: folding them into x - (m + log s) would round m + log s to
// the dtype and lose an ulp of m, a relative error of 1e-3 at logits around 1e5 in float32.
template <class T>
struct Shifted {
  T max, sum;
  Shifted(const T* x, int64_t n) : max(*std::max_element(x, x + n)), sum(0) {
    for (int64_t j = 0; j < n; ++j) sum += std::exp(x[j] - max);
  }
};

template <bool kLog>
class SoftmaxKernel final : public OpKernel {
 public:
  explicit SoftmaxKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Rows rows(x.shape());
    visit_float32_or_64(x, ctx.node().op.c_str(), [&](auto zero) {
      using T = decltype(zero);
      const T* px = x.data<T>();
      T* py = ctx.allocate_output(0, x.dtype(), x.shape()).template data<T>();
      for (int64_t r = 0; r < rows.count; ++r) {
        const T* in = px + r * rows.width;
        T* out = py + r * rows.width;
        Shifted<T> row(in, rows.width);
        if constexpr (kLog) {
          const T log_sum = std::log(row.sum);
          for (int64_t j = 0; j < rows.width; ++j) out[j] = (in[j] - row.max) - log_sum;
        } else {
          for (int64_t j = 0; j < rows.width; ++j) out[j] = std::exp(in[j] - row.max) / row.sum;
        }
      }
    });
  }
};

void softmax_shape(InferenceContext& c) {
  DType t = c.input_type(0);
  if (t != DType::float32 && t != DType::float64) c.error("takes float32 or float64, got {}", name_of(t));
  if (c.input_shape(0).rank() == 0) c.error("needs rank >= 1, got a scalar");
  c.set_output(0, t, c.input_shape(0));
}

TROUPE_REGISTER_OP(OpDef{.name = "Softmax", .num_inputs = 1, .shape_fn = softmax_shape});
TROUPE_REGISTER_OP(OpDef{.name = "LogSoftmax", .num_inputs = 1, .shape_fn = softmax_shape});
TROUPE_REGISTER_KERNEL("Softmax", DeviceType::cpu, SoftmaxKernel<false>);
TROUPE_REGISTER_KERNEL("LogSoftmax", DeviceType::cpu, SoftmaxKernel<true>);

// dx = (g - sum(g * y)) * y
TROUPE_REGISTER_GRADIENT("Softmax", [](const Scope& s, const Node& n, const std::vector<Output>& g) {
  auto y = output_of(s, n);
  auto dot = ops::sum(s, ops::mul(s, g[0], y), std::vector<int64_t>{-1}, true);
  return std::vector<Output>{ops::mul(s, ops::sub(s, g[0], dot), y)};
});
// dx = g - softmax * sum(g)
TROUPE_REGISTER_GRADIENT("LogSoftmax", [](const Scope& s, const Node& n, const std::vector<Output>& g) {
  auto y = output_of(s, n);
  auto total = ops::sum(s, g[0], std::vector<int64_t>{-1}, true);
  return std::vector<Output>{ops::sub(s, g[0], ops::mul(s, ops::exp(s, y), total))};
});

// Outputs: loss [N], backprop [N,C] = d loss / d logits (softmax - target for a distribution).
void xent_shape(InferenceContext& c, bool sparse) {
  DType t = c.input_type(0);
  if (t != DType::float32 && t != DType::float64) c.error("logits must be float32 or float64, got {}", name_of(t));
  auto& logits = c.input_shape(0);
  auto& labels = c.input_shape(1);
  if (logits.rank_known() && logits.rank() != 2) c.error("logits must be [batch, classes], got {}", logits.to_string());
  if (sparse) {
    if (c.input_type(1) != DType::int32 && c.input_type(1) != DType::int64)
      c.error("labels must be int32 or int64 class indices, got {}", name_of(c.input_type(1)));
    if (labels.rank_known() && labels.rank() != 1) c.error("labels must be [batch], got {}", labels.to_string());
    if (logits.rank_known() && labels.rank_known() && logits.dim(0) >= 0 && labels.dim(0) >= 0 &&
        logits.dim(0) != labels.dim(0))
      c.error("logits {} and labels {} differ in batch size", logits.to_string(), labels.to_string());
  } else {
    if (c.input_type(1) != t) c.error("labels must have the dtype of the logits, {}", name_of(t));
    if (!logits.compatible_with(labels))
      c.error("logits {} and labels {} differ in shape", logits.to_string(), labels.to_string());
  }
  PartialShape batch = logits.rank_known() ? PartialShape{logits.dim(0)} : PartialShape::of_rank(1);
  c.set_output(0, t, batch);
  c.set_output(1, t, logits);
}

TROUPE_REGISTER_OP(OpDef{.name = "SparseSoftmaxCrossEntropyWithLogits", .num_inputs = 2, .num_outputs = 2,
                         .shape_fn = [](InferenceContext& c) { xent_shape(c, true); }});
TROUPE_REGISTER_OP(OpDef{.name = "SoftmaxCrossEntropyWithLogits", .num_inputs = 2, .num_outputs = 2,
                         .shape_fn = [](InferenceContext& c) { xent_shape(c, false); }});

template <bool kSparse>
class CrossEntropyKernel final : public OpKernel {
 public:
  explicit CrossEntropyKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    const Tensor& logits = ctx.input(0);
    const Tensor& labels = ctx.input(1);
    if (logits.shape().rank() != 2)
      fail(ErrorCode::invalid_argument, "logits must be [batch, classes], got {}", logits.describe());
    const int64_t n = logits.shape()[0], c = logits.shape()[1];
    if (kSparse ? (labels.shape() != Shape{n}) : (labels.shape() != logits.shape()))
      fail(ErrorCode::invalid_argument, "labels {} do not fit logits {}", labels.describe(), logits.describe());
    visit_float32_or_64(logits, ctx.node().op.c_str(), [&](auto zero) {
      using T = decltype(zero);
      const T* pl = logits.data<T>();
      T* loss = ctx.allocate_output(0, logits.dtype(), Shape{n}).template data<T>();
      T* back = ctx.allocate_output(1, logits.dtype(), logits.shape()).template data<T>();
      for (int64_t r = 0; r < n; ++r) {
        const T* row = pl + r * c;
        T* b = back + r * c;
        Shifted<T> shifted(row, c);
        const T log_sum = std::log(shifted.sum);
        // -log softmax_j = log s - (x_j - m)
        auto neg_log_softmax = [&](int64_t j) { return log_sum - (row[j] - shifted.max); };
        for (int64_t j = 0; j < c; ++j) b[j] = std::exp(row[j] - shifted.max) / shifted.sum;
        if constexpr (kSparse) {
          int64_t label = labels.dtype() == DType::int32 ? int64_t(labels.data<int32_t>()[r])
                                                         : labels.data<int64_t>()[r];
          if (label < 0 || label >= c)
            fail(ErrorCode::invalid_argument, "label {} at row {} is outside [0, {})", label, r, c);
          loss[r] = neg_log_softmax(label);
          b[label] -= T(1);
        } else {
          // d loss / d x_j = softmax_j * sum(p) - p_j: exact even when the labels do not
          // sum to one (TensorFlow's softmax - labels assumes they do).
          const T* p = labels.data<T>() + r * c;
          T l = 0, mass = 0;
          for (int64_t j = 0; j < c; ++j) {
            l += p[j] * neg_log_softmax(j);
            mass += p[j];
          }
          for (int64_t j = 0; j < c; ++j) b[j] = b[j] * mass - p[j];
          loss[r] = l;
        }
      }
    });
  }
};
TROUPE_REGISTER_KERNEL("SparseSoftmaxCrossEntropyWithLogits", DeviceType::cpu, CrossEntropyKernel<true>);
TROUPE_REGISTER_KERNEL("SoftmaxCrossEntropyWithLogits", DeviceType::cpu, CrossEntropyKernel<false>);

// d loss / d logits = backprop * g (per row); labels get none (sparse) or -g * log softmax.
// A gradient reaching the backprop output (g[1], when the first gradient is differentiated
// again) adds backprop's own derivatives: backprop = softmax * mass - labels, with mass = 1
// for sparse labels, so d/d logits is the softmax gradient of g[1] times mass, and
// d/d labels_j = sum(g[1] * softmax) - g[1]_j. gradients() fills a gradient that does not
// reach an output with ZerosLike, and then there is nothing to add.
std::vector<Output> xent_gradient(const Scope& s, const Node& n, const std::vector<Output>& g, bool sparse) {
  auto logits = input_of(s, n, 0);
  auto backprop = output_of(s, n, 1);
  auto per_row = ops::reshape(s, g[0], {-1, 1});
  auto dlogits = ops::mul(s, backprop, per_row);
  Output dlabels;
  if (!sparse) dlabels = ops::mul(s, ops::neg(s, ops::log_softmax(s, logits)), per_row);
  if (g[1] && g[1].node()->op != "ZerosLike") {
    auto softmax = ops::softmax(s, logits);
    auto dot = ops::sum(s, ops::mul(s, g[1], softmax), std::vector<int64_t>{-1}, true);
    auto through_softmax = ops::mul(s, ops::sub(s, g[1], dot), softmax);
    if (!sparse) {
      auto mass = ops::sum(s, input_of(s, n, 1), std::vector<int64_t>{-1}, true);
      through_softmax = ops::mul(s, through_softmax, mass);
      dlabels = ops::add(s, dlabels, ops::sub(s, dot, g[1]));
    }
    dlogits = ops::add(s, dlogits, through_softmax);
  }
  return {dlogits, dlabels};
}
TROUPE_REGISTER_GRADIENT("SparseSoftmaxCrossEntropyWithLogits",
                         [](const Scope& s, const Node& n, const std::vector<Output>& g) {
                           return xent_gradient(s, n, g, true);
                         });
TROUPE_REGISTER_GRADIENT("SoftmaxCrossEntropyWithLogits",
                         [](const Scope& s, const Node& n, const std::vector<Output>& g) {
                           return xent_gradient(s, n, g, false);
                         });

}  // namespace

namespace ops {
Output softmax(const Scope& scope, Output logits) { return &scope.add("Softmax", {logits}); }
Output log_softmax(const Scope& scope, Output logits) { return &scope.add("LogSoftmax", {logits}); }
Output sparse_softmax_cross_entropy_with_logits(const Scope& scope, Output logits, Output labels) {
  return &scope.add("SparseSoftmaxCrossEntropyWithLogits", {logits, labels});
}
Output softmax_cross_entropy_with_logits(const Scope& scope, Output logits, Output labels) {
  return &scope.add("SoftmaxCrossEntropyWithLogits", {logits, labels});
}
}  // namespace ops
}  // namespace troupe
