// A kernel writing its output over an input (KernelContext::forward_or_allocate_output): only
// over a value that came by message and that the firing alone holds; never over a hoisted
// constant, a feed the caller keeps, or a value the step fetches. The elementwise
// kernels' in-place loops give what their loops over two buffers give.
#include <atomic>

#include "op_test.hpp"
#include "ops/kernel.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

// "ForwardProbe": y = x + 1 (float32), over x where the context lets it; says whether it did.
std::atomic<int> probe_forwarded{-1};

class ForwardProbe final : public OpKernel {
 public:
  explicit ForwardProbe(const Node&) {}
  void compute(KernelContext& ctx) override {
    const Tensor& x = ctx.input(0);
    Tensor& y = ctx.forward_or_allocate_output(0, {0}, x.dtype(), x.shape());
    probe_forwarded = y.shares_buffer_with(x) ? 1 : 0;
    const float* px = x.data<float>();
    float* py = y.data<float>();
    for (int64_t i = 0; i < x.num_elements(); ++i) py[i] = px[i] + 1.0f;
  }
};

const bool probe_registered = [] {
  // Stateful: neither folded at planning nor merged with another probe.
  OpRegistry::global().add(OpDef{.name = "ForwardProbe", .num_inputs = 1, .stateful = true, .shape_fn = shape_fns::unchanged});
  KernelRegistry::global().add("ForwardProbe", DeviceType::cpu,
                               [](const Node& n) { return std::unique_ptr<OpKernel>(new ForwardProbe(n)); });
  return true;
}();

Output probe(const Scope& s, Output x) { return &s.add("ForwardProbe", {x}); }

Tensor iota(Shape shape, float from) {
  Tensor t(DType::float32, shape);
  for (int64_t i = 0; i < t.num_elements(); ++i) t.data<float>()[i] = from + float(i);
  return t;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_kernel_writes_over_an_input_that_only_its_firing_holds) {
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, Shape{3});
  auto y = probe(root, ops::neg(root, x));  // Neg's output: Probe's alone
  Session session(root);
  const Tensor xv = iota(Shape{3}, 1);
  probe_forwarded = -1;
  auto out = session.run({{x, xv}}, {y});
  BOOST_TEST(probe_forwarded.load() == 1);
  BOOST_TEST(out[0].to_vector<float>() == (std::vector<float>{0, -1, -2}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_kernel_does_not_write_over_a_constant_a_kept_feed_or_a_fetched_value) {
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, Shape{3});
  auto c = ops::constant<float>(root, {5, 6, 7}, Shape{3});
  auto n = ops::neg(root, x);
  auto over_constant = probe(root.with_op_name("over_constant"), c);
  auto over_feed = probe(root.with_op_name("over_feed"), x);
  auto over_shared = probe(root.with_op_name("over_shared"), n);
  auto also_reads_n = ops::square(root, n);
  Session session(root);
  const Tensor xv = iota(Shape{3}, 1);
  for (int step = 0; step < 2; ++step) {
    probe_forwarded = -1;
    auto out = session.run({{x, xv}}, {over_constant});
    BOOST_TEST(probe_forwarded.load() == 0);
    // The constant is whole at the next step: not written over.
    BOOST_TEST(out[0].to_vector<float>() == (std::vector<float>{6, 7, 8}), boost::test_tools::per_element());
  }
  probe_forwarded = -1;
  auto fed = session.run({{x, xv}}, {over_feed});
  BOOST_TEST(probe_forwarded.load() == 0);
  BOOST_TEST(fed[0].to_vector<float>() == (std::vector<float>{2, 3, 4}), boost::test_tools::per_element());
  BOOST_TEST(xv.to_vector<float>() == (std::vector<float>{1, 2, 3}), boost::test_tools::per_element());
  // Neg's output fetched too: the step holds it until the end, so Probe must not write over it.
  // (Square, its other reader, may be done with it before Probe fires, and then Probe could:
  // a reference count of one says that nothing reads it any more.)
  probe_forwarded = -1;
  auto shared = session.run({{x, xv}}, {over_shared, n, also_reads_n});
  BOOST_TEST(probe_forwarded.load() == 0);
  BOOST_TEST(shared[0].to_vector<float>() == (std::vector<float>{0, -1, -2}), boost::test_tools::per_element());
  BOOST_TEST(shared[1].to_vector<float>() == (std::vector<float>{-1, -2, -3}), boost::test_tools::per_element());
  BOOST_TEST(shared[2].to_vector<float>() == (std::vector<float>{1, 4, 9}), boost::test_tools::per_element());
}

// Chains of elementwise ops whose every intermediate has one reader, so each writes over the
// last one's buffer: against the same ops computed in double. Float32 of 64 elements or more
// takes the vectorized in-place loops, fewer the scalar ones; Sub and Div with the forwarded
// operand on either side (they do not commute), broadcast scalars on either side.
void check_chain(DType dtype, Shape shape, uint32_t seed) {
  std::mt19937 rng(seed);
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), dtype, shape);
  auto s = ops::placeholder(root.with_op_name("s"), dtype, Shape{});
  const Tensor xv = random_tensor(rng, dtype, shape, -2, 2);
  const Tensor sv = random_tensor(rng, dtype, Shape{}, 0.5, 1.5);
  // a = tanh(x + s); b = square(a) - s; c = s - b; d = relu(c) / s; e = s / (d + 2);
  // f = TanhGrad(e, neg(x)): over its gradient e (input 0), g = TanhGrad(x, neg(x)) over y.
  auto a = ops::tanh(root, ops::add(root, x, s));
  auto b = ops::sub(root, ops::square(root, a), s);
  auto c = ops::sub(root, s, b);
  auto d = ops::div(root, ops::relu(root, c), s);
  auto e = ops::div(root, s, ops::add(root, d, ops::cast(root, ops::constant(root, 2.0f), dtype)));
  auto f = Output(&root.add("TanhGrad", {e, ops::neg(root, x)}));
  auto g = Output(&root.add("TanhGrad", {x, ops::neg(root, ops::exp(root, x))}));
  Session session(root);
  auto out = session.run({{x, xv}, {s, sv}}, {f, g});
  const auto xs = as_doubles(xv);
  const double sd = as_doubles(sv)[0];
  std::vector<double> f_expected, g_expected;
  for (double xi : xs) {
    const double av = std::tanh(xi + sd), bv = av * av - sd, cv = sd - bv;
    const double dv = std::max(cv, 0.0) / sd, ev = sd / (dv + 2);
    const double y = -xi;
    f_expected.push_back(ev * (1 - y * y));
    const double y2 = -std::exp(xi);
    g_expected.push_back(xi * (1 - y2 * y2));
  }
  const Tolerance chain{1e-5, dtype == DType::float32 ? 1e-4 : 1e-12};
  check_close(out[0], dtype, shape, f_expected, chain, "f " + shape.to_string());
  check_close(out[1], dtype, shape, g_expected, chain, "g " + shape.to_string());
}

BOOST_AUTO_TEST_CASE(elementwise_ops_over_their_own_inputs_give_what_they_give_over_fresh_buffers) {
  check_chain(DType::float32, Shape{5}, 1);
  check_chain(DType::float32, Shape{64}, 2);
  check_chain(DType::float32, Shape{33, 31}, 3);
  check_chain(DType::float64, Shape{7, 9}, 4);
}
