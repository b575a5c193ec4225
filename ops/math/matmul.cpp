#include "ops/math/matmul.hpp"

#include <cblas.h>

#include "graph/gradients.hpp"
#include "ops/kernel.hpp"
#include "ops/nn/dnnl.hpp"

namespace troupe {
namespace {

void matmul_shape(InferenceContext& c) {
  DType t = c.same_input_types();
  if (t == DType::boolean || t == DType::uint8) c.error("dtype {} is not supported", name_of(t));
  bool ta = c.attr_or<bool>("transpose_a", false), tb = c.attr_or<bool>("transpose_b", false);
  auto& a = c.input_shape(0);
  auto& b = c.input_shape(1);
  if ((a.rank_known() && a.rank() != 2) || (b.rank_known() && b.rank() != 2))
    c.error("inputs must be matrices, got {} and {}", a.to_string(), b.to_string());
  int64_t m = a.rank_known() ? a.dim(ta ? 1 : 0) : -1, k1 = a.rank_known() ? a.dim(ta ? 0 : 1) : -1;
  int64_t k2 = b.rank_known() ? b.dim(tb ? 1 : 0) : -1, n = b.rank_known() ? b.dim(tb ? 0 : 1) : -1;
  if (k1 >= 0 && k2 >= 0 && k1 != k2)
    c.error("inner dimensions differ: {}{} x {}{}", a.to_string(), ta ? "^T" : "", b.to_string(),
            tb ? "^T" : "");
  c.set_output(0, t, PartialShape{m, n});
}

TROUPE_REGISTER_OP(OpDef{.name = "MatMul", .num_inputs = 2, .shape_fn = matmul_shape});

// float32 products go through oneDNN's matmul primitive (its AVX-512 brgemm kernels outrun
// OpenBLAS's SGEMM on a dense layer's shapes, and OpenBLAS's idle threads spin in sched_yield
// and take cores from the other kernels; docs/performance.md, "Fashion-MNIST training").
// Transposes are strides of the memory descriptors, not copies. The primitive is kept for the
// shapes it was made for. float64 goes to OpenBLAS (oneDNN has no f64).
class SgemmPrimitive {
 public:
  void run(const Tensor& a, bool ta, const Tensor& b, bool tb, Tensor& out) {
    if (!key_.matches({&a, &b})) {
      using dnnl::memory;
      const int64_t m = out.shape()[0], n = out.shape()[1], k = a.shape()[ta ? 0 : 1];
      a_ = memory::desc({m, k}, memory::data_type::f32, ta ? memory::dims{1, m} : memory::dims{k, 1});
      b_ = memory::desc({k, n}, memory::data_type::f32, tb ? memory::dims{1, k} : memory::dims{n, 1});
      c_ = memory::desc({m, n}, memory::data_type::f32, memory::dims{n, 1});
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_, b_, c_), dnnl_cpu::attrs(), dnnl_cpu::engine());
      prim_ = dnnl::matmul(pd);
      pad_ = pd.scratchpad_desc();
      key_.set({&a, &b});
    }
    prim_.execute(dnnl_cpu::stream(), {{DNNL_ARG_SRC, dnnl_cpu::wrap(a, a_)},
                                       {DNNL_ARG_WEIGHTS, dnnl_cpu::wrap(b, b_)},
                                       {DNNL_ARG_DST, dnnl_cpu::wrap(out, c_)},
                                       {DNNL_ARG_SCRATCHPAD, dnnl_cpu::scratchpad(pad_)}});
    dnnl_cpu::stream().wait();
  }

 private:
  dnnl_cpu::ShapeKey key_;
  dnnl::memory::desc a_, b_, c_, pad_;
  dnnl::matmul prim_;
};

class MatMulKernel final : public OpKernel {
 public:
  explicit MatMulKernel(const Node& node)
      : ta_(get_attr_or<bool>(node.attrs, "transpose_a", false)),
        tb_(get_attr_or<bool>(node.attrs, "transpose_b", false)) {}

  bool runs_team() const override { return true; }
  void compute(KernelContext& ctx) override {
    const Tensor& a = ctx.input(0);
    const Tensor& b = ctx.input(1);
    if (a.shape().rank() != 2 || b.shape().rank() != 2)
      fail(ErrorCode::invalid_argument, "inputs must be matrices, got {} and {}", a.describe(),
           b.describe());
    int64_t m = a.shape()[ta_ ? 1 : 0], k = a.shape()[ta_ ? 0 : 1];
    int64_t k2 = b.shape()[tb_ ? 1 : 0], n = b.shape()[tb_ ? 0 : 1];
    if (k != k2)
      fail(ErrorCode::invalid_argument, "inner dimensions differ: {}{} x {}{}",
           a.shape().to_string(), ta_ ? "^T" : "", b.shape().to_string(), tb_ ? "^T" : "");
    if (a.dtype() != b.dtype())
      fail(ErrorCode::invalid_argument, "operands have dtypes {} and {}", name_of(a.dtype()),
           name_of(b.dtype()));
    Tensor& out = ctx.allocate_output(0, a.dtype(), Shape{m, n});
    if (m == 0 || n == 0) return;
    auto trans = [](bool t) { return t ? CblasTrans : CblasNoTrans; };
    const int lda = int(a.shape()[1]), ldb = int(b.shape()[1]);
    switch (a.dtype()) {
      case DType::float32:
        if (k == 0) {
          std::fill_n(out.data<float>(), m * n, 0.0f);
          return;
        }
        sgemm_.run(a, ta_, b, tb_, out);
        return;
      case DType::float64:
        if (k == 0) {
          std::fill_n(out.data<double>(), m * n, 0.0);
          return;
        }
        cblas_dgemm(CblasRowMajor, trans(ta_), trans(tb_), int(m), int(n), int(k), 1.0,
                    a.data<double>(), lda, b.data<double>(), ldb, 0.0, out.data<double>(), int(n));
        return;
      default:
        visit_dtype(a.dtype(), [&](auto zero) {
          using T = decltype(zero);
          if constexpr (std::is_same_v<T, bool> || std::is_same_v<T, uint8_t>) {
            fail(ErrorCode::invalid_argument, "MatMul is not defined for {}", name_of(a.dtype()));
          } else {
            using C = std::conditional_t<std::is_same_v<T, half>, float, T>;
            const T* pa = a.data<T>();
            const T* pb = b.data<T>();
            T* po = out.data<T>();
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < n; ++j) {
                C s = 0;
                for (int64_t p = 0; p < k; ++p)
                  s += C(pa[ta_ ? p * lda + i : i * lda + p]) * C(pb[tb_ ? j * ldb + p : p * ldb + j]);
                po[i * n + j] = T(s);
              }
          }
        });
    }
  }

 private:
  bool ta_, tb_;
  SgemmPrimitive sgemm_;
};
TROUPE_REGISTER_KERNEL("MatMul", DeviceType::cpu, MatMulKernel);

// For y = op(a) op(b), with g = dy: the four transpose cases of the product rule.
TROUPE_REGISTER_GRADIENT("MatMul", [](const Scope& s, const Node& n, const std::vector<Output>& g) {
  auto a = input_of(s, n, 0), b = input_of(s, n, 1);
  bool ta = get_attr_or<bool>(n.attrs, "transpose_a", false);
  bool tb = get_attr_or<bool>(n.attrs, "transpose_b", false);
  auto mm = [&](Output x, Output y, bool tx, bool ty) {
    return ops::matmul(s, x, y, {.transpose_a = tx, .transpose_b = ty});
  };
  if (!ta && !tb) return std::vector<Output>{mm(g[0], b, false, true), mm(a, g[0], true, false)};
  if (ta && !tb) return std::vector<Output>{mm(b, g[0], false, true), mm(a, g[0], false, false)};
  if (!ta && tb) return std::vector<Output>{mm(g[0], b, false, false), mm(g[0], a, true, false)};
  return std::vector<Output>{mm(b, g[0], true, true), mm(g[0], a, true, true)};
});

}  // namespace

Output ops::matmul(const Scope& scope, Output a, Output b, MatMulOptions options) {
  return &scope.add("MatMul", {a, b},
                    {{"transpose_a", options.transpose_a}, {"transpose_b", options.transpose_b}});
}

}  // namespace troupe
