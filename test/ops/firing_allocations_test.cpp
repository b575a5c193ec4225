// What a kernel's firing allocates from the heap besides its output: nothing, for the kernels an
// iteration of troupe-bench loop's bodies runs (Cast, an Add broadcasting a scalar, Tanh,
// Square, a Sum to a few values). Counted by this binary's operator new, on the firing's
// thread; the output's buffer object and bytes come back to the thread's own pools once the
// output is let go of, so a warmed-up firing takes them from there.
#include <cstdlib>
#include <new>

#include "op_test.hpp"
#include "ops/kernel.hpp"

namespace {
thread_local long heap_allocations = 0;
}  // namespace

void* operator new(std::size_t bytes) {
  ++heap_allocations;
  if (void* p = std::malloc(bytes ? bytes : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

using namespace troupe;
using namespace troupe::testing;

namespace {

// Heap allocations of `firings` firings of `node`'s kernel over `inputs`, after two firings
// that warm up the thread's pools; each firing's output is let go of before the next.
long allocations_of_firings(const Node& node, std::vector<Tensor> inputs, int firings) {
  const Device& cpu = DeviceRegistry::instance().cpu();
  auto kernel = KernelRegistry::global().create(node, DeviceType::cpu);
  Tensor output;
  auto fire = [&] {
    output.reset();
    KernelContext ctx(node, cpu, inputs.data(), int(inputs.size()), &output, 1);
    kernel->compute(ctx);
  };
  fire();
  fire();
  const long before = heap_allocations;
  for (int i = 0; i < firings; ++i) fire();
  const long made = heap_allocations - before;
  BOOST_TEST(output.is_initialized());
  return made;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_sum_to_a_few_values_allocates_nothing_but_its_output_when_it_fires) {
  // A whole tensor's sum, and sixteen rows' sums: the accumulators of up to sixteen outputs
  // live in the firing's frame.
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, Shape{16, 128});
  auto all = ops::sum(root, x);
  auto rows = ops::sum(root, x, std::vector<int64_t>{-1});
  std::mt19937 rng(7);
  const Tensor xv = random_tensor(rng, DType::float32, Shape{16, 128}, -1, 1);
  BOOST_TEST(allocations_of_firings(*all.node(), {xv}, 10) == 0);
  BOOST_TEST(allocations_of_firings(*rows.node(), {xv}, 10) == 0);
}

BOOST_AUTO_TEST_CASE(an_add_broadcasting_a_scalar_allocates_nothing_but_its_output_when_it_fires) {
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, Shape{128, 128});
  auto y = ops::add(root, x, ops::constant(root, 1.0f));
  std::mt19937 rng(7);
  const Tensor xv = random_tensor(rng, DType::float32, Shape{128, 128}, -1, 1);
  BOOST_TEST(allocations_of_firings(*y.node(), {xv, Tensor::scalar(1.0f)}, 10) == 0);
}

BOOST_AUTO_TEST_CASE(cast_tanh_and_square_allocate_nothing_but_their_outputs_when_they_fire) {
  auto root = Scope::root();
  auto i = ops::placeholder(root.with_op_name("i"), DType::int32, Shape{});
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, Shape{128, 128});
  auto cast = ops::cast(root, i, DType::float32);
  auto tanh = ops::tanh(root, x);
  auto square = ops::square(root, x);
  std::mt19937 rng(7);
  const Tensor xv = random_tensor(rng, DType::float32, Shape{128, 128}, -1, 1);
  BOOST_TEST(allocations_of_firings(*cast.node(), {Tensor::scalar<int32_t>(3)}, 10) == 0);
  BOOST_TEST(allocations_of_firings(*tanh.node(), {xv}, 10) == 0);
  BOOST_TEST(allocations_of_firings(*square.node(), {xv}, 10) == 0);
}
