// while_loop: frames and iterations as tags, loop invariants, nested loops, conds inside
// loops, dead loops, parallel iterations, bounded state, and errors that name the iteration.
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>

#include <atomic>
#include <future>
#include <optional>
#include <chrono>
#include <thread>

#include "actors/runtime.hpp"
#include "actors/session.hpp"
#include "ops/all.hpp"
#include "graph/gradients.hpp"
#include "graph/graph_def.hpp"
#include "ops/kernel.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/settles.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;
using troupe::testing::settles;

namespace {

using Vars = std::vector<Output>;

Output i32(const Scope& s, int32_t v) { return ops::constant(s, v); }

// n! for a fed n: vars (i, acc), while i <= n: (i + 1, acc * i). n is a loop invariant.
struct Factorial {
  Scope root = Scope::root();
  Output n = ops::placeholder(root.with_op_name("n"), DType::int32, Shape{});
  std::vector<Output> out = ops::while_loop(
      root, [&](const Scope& s, const Vars& v) { return ops::less_equal(s, v[0], n); },
      [](const Scope& s, const Vars& v) { return Vars{ops::add(s, v[0], i32(s, 1)), ops::mul(s, v[1], v[0])}; },
      {i32(root, 1), i32(root, 1)});
};

// A test op that counts how many of its kind run at once; its kernel sleeps so that runs
// that can overlap do.
std::atomic<int> probes_running{0};
std::atomic<int> probes_most{0};
std::atomic<int> probes_done{0};

class ProbeKernel final : public OpKernel {
 public:
  explicit ProbeKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    int now = ++probes_running;
    int seen = probes_most.load();
    while (now > seen && !probes_most.compare_exchange_weak(seen, now)) {
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(15));
    ++probes_done;
    --probes_running;
    ctx.set_output(0, ctx.input(0));
  }
};
TROUPE_REGISTER_OP(OpDef{.name = "TestProbe", .num_inputs = 1, .stateful = true,
                         .shape_fn = shape_fns::unchanged});
TROUPE_REGISTER_KERNEL("TestProbe", DeviceType::cpu, ProbeKernel);

// The node of `g` named `suffix` at the end, or null.
const Node* node_ending(const Graph& g, const std::string& suffix) {
  for (int id = 0; id < g.size(); ++id) {
    const std::string& name = g.node(id).name;
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0)
      return &g.node(id);
  }
  return nullptr;
}

// The most probes seen running at once in a loop of 6 iterations whose body is a chain of
// three probes beside the counter: iterations can overlap only by pipelining along the chain.
int most_probes_at_once(int parallel_iterations) {
  auto root = Scope::root();
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 6)); },
      [](const Scope& s, const Vars& v) {
        Output x = v[0];
        for (int i = 0; i < 3; ++i) x = Output(&s.add("TestProbe", {x}));
        return Vars{ops::add(s, v[0], i32(s, 1))};
      },
      {i32(root, 0)}, {.parallel_iterations = parallel_iterations});
  Session s(root, SessionOptions{.threads = 4});
  probes_most = 0;
  BOOST_TEST(s.run({out[0]})[0].scalar_value<int32_t>() == 6);
  BOOST_TEST(settles(s));
  return probes_most.load();
}

long max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

}  // namespace

BOOST_AUTO_TEST_CASE(factorial_by_while_loop) {
  Factorial f;
  Session s(f.root);
  auto run = [&](int32_t n) { return s.run({{f.n, Tensor::scalar<int32_t>(n)}}, {f.out[1]})[0].scalar_value<int32_t>(); };
  BOOST_TEST(run(5) == 120);
  BOOST_TEST(run(10) == 3628800);
  BOOST_TEST(run(0) == 1, "a loop whose condition fails at once returns its initial values");
  BOOST_TEST(run(1) == 1);
  BOOST_TEST(s.num_executables() == 1);
  BOOST_TEST(settles(s), "no node keeps a frame once the loop is over:\n" << s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(fibonacci_by_while_loop) {
  auto root = Scope::root();
  auto n = ops::placeholder(root, DType::int32, Shape{});
  auto out = ops::while_loop(
      root, [&](const Scope& s, const Vars& v) { return ops::less(s, v[0], n); },
      [](const Scope& s, const Vars& v) { return Vars{ops::add(s, v[0], i32(s, 1)), v[2], ops::add(s, v[1], v[2])}; },
      {i32(root, 0), i32(root, 0), i32(root, 1)}, {.name = "fib"});
  Session s(root);
  auto fib = [&](int32_t k) { return s.run({{n, Tensor::scalar<int32_t>(k)}}, {out[1]})[0].scalar_value<int32_t>(); };
  BOOST_TEST(fib(10) == 55);
  BOOST_TEST(fib(30) == 832040);
  BOOST_TEST(fib(1) == 1);
  BOOST_TEST(settles(s));
}

BOOST_AUTO_TEST_CASE(iterations_that_start_before_their_loop_invariant_wait_for_it_and_say_so) {
  // while i < n: (i + 1, acc + n), n dequeued: the loop's variables enter, and its first
  // iteration starts, before n has come. The loop's first Merge, which serves n to each
  // iteration it starts (LoopPlan::hosted), gives it to that iteration once it comes; until
  // then a wait report names the invariant. A step aborted meanwhile leaves nothing behind,
  // and the next computes from its own n.
  auto root = Scope::root();
  auto q = ops::Queue::fifo(root, {DType::int32}, {PartialShape{}}, {.shared_name = "bound"});
  auto n = q.dequeue(root.with_op_name("n"))[0];
  auto v = ops::placeholder(root.with_op_name("v"), DType::int32, Shape{});
  auto put = q.enqueue(root.with_op_name("put"), {v});
  auto out = ops::while_loop(
      root, [&](const Scope& s, const Vars& x) { return ops::less(s, x[0], n); },
      [&](const Scope& s, const Vars& x) { return Vars{ops::add(s, x[0], i32(s, 1)), ops::add(s, x[1], n)}; },
      {i32(root, 0), i32(root, 0)}, {.parallel_iterations = 4, .name = "loop"});
  Session s(root);
  auto held = std::async(std::launch::async,
                         [&] { return s.run({}, {out[1]}, {}, {.timeout = std::chrono::seconds(20)}); });
  std::optional<WaitingNode> seen;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       !seen && std::chrono::steady_clock::now() < until;) {
    for (auto& w : s.waiting_nodes())
      if (w.node == "loop/invariant/n") seen = w;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  BOOST_TEST_REQUIRE(seen.has_value(), "no wait for the loop invariant n:\n" << s.describe_waiting());
  // ("n:0", or across devices the _Recv that brings it: "n/_recv...:0 (from ...)")
  BOOST_TEST_REQUIRE(seen->missing.size() == 1u);
  BOOST_TEST(contains(seen->missing[0], "the loop invariant n"), seen->missing[0]);
  s.run({{v, Tensor::scalar<int32_t>(4)}}, {}, {put});
  BOOST_TEST(held.get()[0].scalar_value<int32_t>() == 16);
  auto m = error_of([&] { s.run({}, {out[1]}, {}, {.timeout = std::chrono::milliseconds(200)}); },
                    ErrorCode::deadline_exceeded);
  BOOST_TEST(contains(m, "'loop/invariant/n'"), m);
  BOOST_TEST(contains(m, "0 of 1 inputs, waits for the loop invariant n"), m);
  BOOST_TEST(settles(s), s.describe_waiting());
  s.run({{v, Tensor::scalar<int32_t>(3)}}, {}, {put});
  BOOST_TEST(s.run({}, {out[1]})[0].scalar_value<int32_t>() == 9);
  BOOST_TEST(settles(s), s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(nested_loops_see_the_outer_iteration_and_outer_invariants) {
  // for i in [0, 4): for j in [0, i): total += m   =>  total = m * (0 + 1 + 2 + 3)
  auto root = Scope::root();
  auto m = ops::placeholder(root.with_op_name("m"), DType::int32, Shape{});
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 4)); },
      [&](const Scope& s, const Vars& outer) {
        Output i = outer[0];
        auto inner = ops::while_loop(
            s, [&](const Scope& t, const Vars& v) { return ops::less(t, v[0], i); },
            [&](const Scope& t, const Vars& v) { return Vars{ops::add(t, v[0], i32(t, 1)), ops::add(t, v[1], m)}; },
            {i32(s, 0), outer[1]}, {.name = "inner"});
        return Vars{ops::add(s, i, i32(s, 1)), inner[1]};
      },
      {i32(root, 0), i32(root, 0)}, {.name = "outer"});
  Session s(root);
  BOOST_TEST(s.run({{m, Tensor::scalar<int32_t>(5)}}, {out[1]})[0].scalar_value<int32_t>() == 30);
  BOOST_TEST(s.run({{m, Tensor::scalar<int32_t>(-2)}}, {out[1]})[0].scalar_value<int32_t>() == -12);
  BOOST_TEST(settles(s), s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(a_cond_inside_a_loop_takes_its_branch_per_iteration) {
  // sum over i in [0, 10) of (i < 5 ? 2 i : i) = 2 (0+1+2+3+4) + (5+6+7+8+9) = 55
  auto root = Scope::root();
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 10)); },
      [](const Scope& s, const Vars& v) {
        auto term = ops::cond(
            s, ops::less(s, v[0], i32(s, 5)), {v[0]},
            [](const Scope& b, const Vars& in) { return Vars{ops::mul(b, in[0], i32(b, 2))}; },
            [](const Scope& b, const Vars& in) { return Vars{ops::identity(b, in[0])}; })[0];
        return Vars{ops::add(s, v[0], i32(s, 1)), ops::add(s, v[1], term)};
      },
      {i32(root, 0), i32(root, 0)});
  Session s(root);
  BOOST_TEST(s.run({out[1]})[0].scalar_value<int32_t>() == 55);
  BOOST_TEST(settles(s), s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(a_loop_in_an_untaken_branch_is_dead_and_does_not_run) {
  // The loop would divide by zero in its first iteration if it ran.
  auto root = Scope::root();
  auto p = ops::placeholder(root, DType::boolean, Shape{});
  auto out = ops::cond(
      root, p, {i32(root, 0)},
      [](const Scope& s, const Vars& in) {
        return Vars{ops::while_loop(
            s, [](const Scope& t, const Vars& v) { return ops::less(t, v[0], i32(t, 3)); },
            [](const Scope& t, const Vars& v) { return Vars{ops::add(t, v[0], ops::div(t, i32(t, 1), v[0]))}; },
            {in[0]})[0]};
      },
      [](const Scope& s, const Vars& in) { return Vars{ops::add(s, in[0], i32(s, 7))}; })[0];
  Session s(root);
  BOOST_TEST(s.run({{p, Tensor::scalar(false)}}, {out})[0].scalar_value<int32_t>() == 7);
  BOOST_TEST(settles(s), "a dead loop leaves no frame behind:\n" << s.describe_waiting());
  auto m = error_of([&] { s.run({{p, Tensor::scalar(true)}}, {out}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "division by zero"), m);
}

BOOST_AUTO_TEST_CASE(parallel_iterations_bounds_how_many_iterations_overlap) {
  BOOST_TEST(most_probes_at_once(1) == 1, "with parallel_iterations 1 an iteration waits for the one before");
  // Overlapping needs a second scheduler thread (the suite also runs on one: TROUPE_CAF_OPTIONS).
  auto runtime = Runtime::get(4);  // the sessions below share it
  if (runtime->threads() < 2) return;
  BOOST_TEST(most_probes_at_once(4) >= 2, "with parallel_iterations 4 later iterations start while earlier run");
}

BOOST_AUTO_TEST_CASE(a_step_ends_only_after_every_iteration_of_its_loop_has_finished) {
  // The body's only work beside the counter is a slow probe that nothing reads. The loop's
  // condition turns false while the probes still run; the Exit waits for the iteration gate,
  // so the step (and a read of what the body updated, in the next) comes after them.
  auto root = Scope::root();
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 2)); },
      [](const Scope& s, const Vars& v) {
        s.add("TestProbe", {v[0]});
        return Vars{ops::add(s, v[0], i32(s, 1))};
      },
      {i32(root, 0)}, {.parallel_iterations = 10});
  Session s(root, SessionOptions{.threads = 4});  // two workers free for the loop's control
  for (int step = 1; step <= 3; ++step) {
    probes_done = 0;
    BOOST_TEST(s.run({out[0]})[0].scalar_value<int32_t>() == 2);
    BOOST_TEST(probes_done.load() == 2, "step " << step << ": " << probes_done.load() << " of 2 probes finished");
    BOOST_TEST(probes_running.load() == 0);
  }
  BOOST_TEST(settles(s));
}

BOOST_AUTO_TEST_CASE(a_loops_iteration_gate_waits_for_its_work_not_for_its_counter) {
  // The counter's add feeds only the NextIteration: iteration k + 1 takes its value, so it has
  // fired long before iteration k + parallel_iterations may start, and the gate does not wait
  // for it (which, on two workers, was a message from the loop's control to the worker running
  // the iteration, every iteration). The body's work is what the gate waits for.
  auto root = Scope::root();
  ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 5)); },
      [](const Scope& s, const Vars& v) {
        s.with_op_name("probe").add("TestProbe", {v[0]});
        return Vars{ops::add(s.with_op_name("counter"), v[0], i32(s, 1))};
      },
      {i32(root, 0)}, {.parallel_iterations = 4, .name = "work"});
  // Two variables whose updates are all there is: the gate waits for them (it has nothing else).
  ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 5)); },
      [](const Scope& s, const Vars& v) {
        return Vars{ops::add(s.with_op_name("counter"), v[0], i32(s, 1)), ops::add(s.with_op_name("sum"), v[1], v[0])};
      },
      {i32(root, 0), i32(root, 0)}, {.parallel_iterations = 4, .name = "updates"});
  const Graph& g = root.graph();
  auto waits_for = [&](const Node* gate, const Node* n) {
    BOOST_TEST_REQUIRE(gate);
    BOOST_TEST_REQUIRE(n);
    return std::find(gate->control_inputs.begin(), gate->control_inputs.end(), n->id) != gate->control_inputs.end();
  };
  // The work is one node: it is the gate itself (no NoOp), the NextIteration and Exit wait for it.
  BOOST_TEST(!node_ending(g, "work/iteration_done"));
  const Node* next = node_ending(g, "work/var_0_next/next_iteration");
  BOOST_TEST(waits_for(next, node_ending(g, "work/body/probe")));
  BOOST_TEST(!waits_for(next, node_ending(g, "work/body/counter")));
  const Node* gate = node_ending(g, "updates/iteration_done");
  BOOST_TEST(waits_for(gate, node_ending(g, "updates/body/counter")));
  BOOST_TEST(waits_for(gate, node_ending(g, "updates/body/sum")));
}

BOOST_AUTO_TEST_CASE(an_exit_waiting_for_its_loops_last_iterations_says_so_and_leaves_once_they_finish) {
  // Each iteration's work takes an element from a queue that is empty until the test fills it:
  // the condition turns false at iteration 3 while iteration 0 still waits, and the Exit, which
  // has the loop's last value, waits for every iteration to finish (told once, by the
  // NextIteration), and says so in a report of what the step waits for.
  auto root = Scope::root();
  auto q = ops::Queue::fifo(root, {DType::float32}, {PartialShape{}}, {.shared_name = "iterations"});
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 3)); },
      [&](const Scope& s, const Vars& v) {
        q.dequeue(s.with_op_name("take"));
        return Vars{ops::add(s, v[0], i32(s, 1))};
      },
      {i32(root, 0)}, {.parallel_iterations = 10, .name = "held"});
  auto put = q.enqueue(root.with_op_name("put"), {ops::constant(root, 1.0f)});
  Session s(root);
  auto step = std::async(std::launch::async, [&] {
    return s.run({}, {out[0]}, {}, {.timeout = std::chrono::seconds(30)})[0].scalar_value<int32_t>();
  });
  const std::string waits = "every iteration through 3 to finish (iteration 0 has not)";
  std::string report;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       !contains(report, waits) && std::chrono::steady_clock::now() < until;) {
    report = s.describe_waiting();
    if (!contains(report, waits)) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  BOOST_TEST(contains(report, "node 'held/switch_0/exit'"), report);
  BOOST_TEST(contains(report, waits), report);
  for (int i = 0; i < 3; ++i) {
    const bool ended = step.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
    BOOST_TEST(!ended, "the step ended with " << i << " of its iterations' elements given");
    s.run({}, {}, {put});
  }
  BOOST_TEST(step.get() == 3);
  BOOST_TEST(settles(s), s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(a_loop_of_a_million_iterations_runs_in_bounded_memory) {
  auto root = Scope::root();
  auto n = ops::placeholder(root, DType::int32, Shape{});
  auto out = ops::while_loop(
      root, [&](const Scope& s, const Vars& v) { return ops::less(s, v[0], n); },
      [](const Scope& s, const Vars& v) {
        return Vars{ops::add(s, v[0], i32(s, 1)), ops::add(s, v[1], ops::constant(s, Tensor::from_vector<float>(std::vector<float>(256, 1.0f))))};
      },
      {i32(root, 0), ops::constant(root, Tensor::zeros(DType::float32, Shape{256}))});
  Session s(root);
  auto run = [&](int32_t k) { return s.run({{n, Tensor::scalar<int32_t>(k)}}, std::vector<TensorName>{out[0], out[1]}); };
  run(1000);  // warm: actors, kernels, allocator caches
  long before = max_rss_kib();
  auto r = run(1000000);
  long grown_mib = (max_rss_kib() - before) / 1024;
  BOOST_TEST(r[0].scalar_value<int32_t>() == 1000000);
  BOOST_TEST(r[1].data<float>()[255] == 1000000.0f);
#ifndef __SANITIZE_ADDRESS__
  BOOST_TEST(grown_mib < 32, "a finished iteration's state is freed; the peak grew by " << grown_mib << " MiB");
#else
  // AddressSanitizer keeps freed memory in quarantine (256 MiB by default): the peak says nothing.
  BOOST_TEST_MESSAGE("under AddressSanitizer the peak grew by " << grown_mib << " MiB (its quarantine); not checked");
#endif
  BOOST_TEST(settles(s), s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(an_error_in_an_iteration_names_the_frame_and_the_iteration) {
  // x / (3 - i) fails at i = 3.
  auto root = Scope::root();
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 10)); },
      [](const Scope& s, const Vars& v) {
        auto q = ops::div(s.with_op_name("quotient"), i32(s, 6), ops::sub(s, i32(s, 3), v[0]));
        return Vars{ops::add(s, v[0], i32(s, 1)), ops::add(s, v[1], q)};
      },
      {i32(root, 0), i32(root, 0)}, {.name = "divide"});
  Session s(root);
  auto m = error_of([&] { s.run({out[1]}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "divide/body/quotient"), m);
  BOOST_TEST(contains(m, "in frame 'divide' iteration 3"), m);
  BOOST_TEST(contains(m, "division by zero"), m);
  BOOST_TEST(settles(s), "the failed step's frames are dropped:\n" << s.describe_waiting());
  // The session still runs other steps.
  auto ok = ops::add(root, i32(root, 1), i32(root, 2));
  BOOST_TEST(s.run({ok})[0].scalar_value<int32_t>() == 3);
}

BOOST_AUTO_TEST_CASE(a_body_that_changes_a_loop_variables_dtype_is_refused) {
  auto root = Scope::root();
  auto m = error_of(
      [&] {
        ops::while_loop(
            root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 3)); },
            [](const Scope& s, const Vars& v) { return Vars{ops::cast(s, v[0], DType::float32)}; }, {i32(root, 0)});
      },
      ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "loop variable 0 is int32 before the loop but the body returns float32"), m);
}

// Start [2]; each iteration appends p, whose length is known only when fed: the loop's value
// has a different length in every iteration, so its shape is [?], not the [2] it started with.
struct GrowingLoop {
  Scope root = Scope::root();
  Output p = ops::placeholder(root.with_op_name("p"), DType::float32, PartialShape{-1});
  Output out(ops::WhileOptions o = {}) {
    return ops::while_loop(
        root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 2)); },
        [&](const Scope& s, const Vars& v) {
          return Vars{ops::add(s, v[0], i32(s, 1)), ops::concat(s, {v[1], p}, 0)};
        },
        {i32(root, 0), ops::constant<float>(root, {1, 2}, Shape{2})}, o)[1];
  }
};

BOOST_AUTO_TEST_CASE(a_loop_variable_whose_body_returns_a_less_specific_shape_is_relaxed) {
  GrowingLoop l;
  auto v = l.out();
  BOOST_TEST(v.shape().to_string() == "[?]");
  // A MatMul that only fits the start shape is refused when it is built, not when it runs.
  auto row = ops::reshape(l.root, v, {1, -1});
  auto w = ops::constant<float>(l.root, {1, 1}, Shape{2, 1});
  BOOST_TEST(ops::matmul(l.root, row, w).shape().to_string() == "[1,1]");
  Session session(l.root);
  auto out = session.run({{l.p, Tensor::from_vector<float>({3}, {1})}}, {v})[0];
  BOOST_TEST(out.to_string() == Tensor::from_vector<float>({1, 2, 3, 3}, {4}).to_string());
}

BOOST_AUTO_TEST_CASE(a_merge_of_two_shapes_is_what_both_satisfy) {
  auto root = Scope::root();
  auto pred = ops::placeholder(root.with_op_name("pred"), DType::boolean, Shape{});
  auto y = ops::cond(
      root, pred, {},
      [](const Scope& s, const Vars&) { return Vars{ops::constant<float>(s, {1, 2}, Shape{2})}; },
      [](const Scope& s, const Vars&) { return Vars{ops::constant<float>(s, {1, 2, 3}, Shape{3})}; })[0];
  BOOST_TEST(y.shape().to_string() == "[?]");
}

BOOST_AUTO_TEST_CASE(shape_invariants_state_the_loop_variables_shapes) {
  GrowingLoop l;
  auto v = l.out({.shape_invariants = {Shape{}, PartialShape{-1}}});
  BOOST_TEST(v.shape().to_string() == "[?]");
  Session session(l.root);
  BOOST_TEST(session.run({{l.p, Tensor::from_vector<float>({5, 6}, {2})}}, {v})[0].num_elements() == 6);
}

BOOST_AUTO_TEST_CASE(a_shape_invariant_the_body_does_not_keep_is_refused_naming_the_variable) {
  GrowingLoop l;
  auto m = error_of([&] { l.out({.shape_invariants = {Shape{}, Shape{2}}}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "loop variable 1 has the shape invariant [2] but the body returns [?]"), m);
  GrowingLoop k;
  auto start = error_of([&] { k.out({.shape_invariants = {Shape{}, Shape{3}}}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(start, "the shape invariant [3] of loop variable 1 does not cover its shape before the loop, [2]"),
             start);
  GrowingLoop c;
  auto count = error_of([&] { c.out({.shape_invariants = {Shape{}}}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(count, "1 shape invariants for 2 loop variables"), count);
}

BOOST_AUTO_TEST_CASE(fetching_a_value_inside_a_loop_is_refused) {
  auto root = Scope::root();
  Output inside;
  ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 3)); },
      [&](const Scope& s, const Vars& v) {
        inside = ops::add(s.with_op_name("step"), v[0], i32(s, 1));
        return Vars{inside};
      },
      {i32(root, 0)});
  Session s(root);
  auto m = error_of([&] { s.run({inside}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "is inside while loop 'while'"), m);
}

// Gradients through while loops.

namespace {

float scalar_of(const Tensor& t) { return t.scalar_value<float>(); }

// h_{t+1} = tanh(h_t W + b) for `steps` steps from h0; loss = sum(h_T^2). Built as a while loop
// and unrolled by hand, over the same placeholders.
struct Rnn {
  static constexpr int kSteps = 5;
  Scope root = Scope::root();
  Output h0 = ops::placeholder(root.with_op_name("h0"), DType::float32, Shape{2, 3});
  Output w = ops::placeholder(root.with_op_name("w"), DType::float32, Shape{3, 3});
  Output b = ops::placeholder(root.with_op_name("b"), DType::float32, Shape{3});
  Output loop_loss, unrolled_loss;
  std::vector<Output> loop_grads, unrolled_grads;
  explicit Rnn(int parallel_iterations) {
    auto cell = [&](const Scope& s, Output h) { return ops::tanh(s, ops::add(s, ops::matmul(s, h, w), b)); };
    auto out = ops::while_loop(
        root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, kSteps)); },
        [&](const Scope& s, const Vars& v) { return Vars{ops::add(s, v[0], i32(s, 1)), cell(s, v[1])}; },
        {i32(root, 0), h0}, {.parallel_iterations = parallel_iterations, .name = "rnn"});
    loop_loss = ops::sum(root, ops::square(root, out[1]));
    Output h = h0;
    for (int t = 0; t < kSteps; ++t) h = cell(root.sub("unrolled"), h);
    unrolled_loss = ops::sum(root, ops::square(root, h));
    loop_grads = gradients(root, {loop_loss}, {w, b, h0});
    unrolled_grads = gradients(root, {unrolled_loss}, {w, b, h0});
  }
  FeedList feeds(float w00_shift = 0) const {
    std::vector<float> wv = {0.5f, -0.3f, 0.2f, 0.1f, 0.4f, -0.6f, -0.2f, 0.3f, 0.7f};
    wv[0] += w00_shift;
    return {{h0, Tensor::from_vector<float>({0.1f, -0.2f, 0.3f, 0.5f, 0.4f, -0.1f}, Shape{2, 3})},
            {w, Tensor::from_vector<float>(wv, Shape{3, 3})},
            {b, Tensor::from_vector<float>({0.05f, -0.1f, 0.2f})}};
  }
};

void expect_close(const Tensor& a, const Tensor& b, float tolerance, const std::string& what) {
  BOOST_REQUIRE(a.shape() == b.shape());
  for (int64_t i = 0; i < a.num_elements(); ++i)
    BOOST_TEST(std::abs(a.data<float>()[i] - b.data<float>()[i]) <= tolerance,
               what << "[" << i << "]: " << a.data<float>()[i] << " vs " << b.data<float>()[i]);
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_gradient_of_a_loop_of_products_is_the_derivative_of_the_power) {
  // y = y0 * x^3 by three multiplications in a loop: dy/dx = 3 y0 x^2, dy/dy0 = x^3.
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, Shape{});
  auto y0 = ops::placeholder(root, DType::float32, Shape{});
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 3)); },
      [&](const Scope& s, const Vars& v) { return Vars{ops::add(s, v[0], i32(s, 1)), ops::mul(s, v[1], x)}; },
      {i32(root, 0), y0});
  auto g = gradients(root, {out[1]}, {x, y0});
  Session s(root);
  auto r = s.run({{x, Tensor::scalar(2.0f)}, {y0, Tensor::scalar(1.5f)}}, {out[1], g[0], g[1]});
  BOOST_TEST(scalar_of(r[0]) == 12.0f);
  BOOST_TEST(scalar_of(r[1]) == 18.0f);  // 3 * 1.5 * 4
  BOOST_TEST(scalar_of(r[2]) == 8.0f);
  BOOST_TEST(settles(s), "the stacks and frames of both loops are freed:\n" << s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(a_loop_whose_one_sink_is_its_gate_gets_a_gate_that_waits_for_its_saved_values_too) {
  // y = y0 * x^3 as above, each iteration's y also summed into nothing (the body's one sink
  // beside the updates, which is then the loop's gate): the gradient saves y each iteration, and
  // the forward loop's Exits must wait for those saves as for the sum.
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, Shape{});
  auto y0 = ops::placeholder(root, DType::float32, Shape{});
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 3)); },
      [&](const Scope& s, const Vars& v) {
        ops::sum(s.with_op_name("report"), ops::square(s, v[1]));
        return Vars{ops::add(s, v[0], i32(s, 1)), ops::mul(s, v[1], x)};
      },
      {i32(root, 0), y0}, {.parallel_iterations = 10, .name = "power"});
  const Node* report = node_ending(root.graph(), "power/body/report");
  const Node* next = node_ending(root.graph(), "power/var_1_next/next_iteration");
  BOOST_TEST_REQUIRE(report);
  BOOST_TEST_REQUIRE(next);
  BOOST_TEST(next->control_inputs == std::vector<int>{report->id});
  BOOST_TEST(!node_ending(root.graph(), "power/iteration_done"));
  auto g = gradients(root, {out[1]}, {x, y0});
  const Node* gate = node_ending(root.graph(), "power/iteration_done");
  BOOST_TEST_REQUIRE(gate);
  BOOST_TEST(gate->op == "NoOp");
  BOOST_TEST(next->control_inputs == std::vector<int>{gate->id}, "the NextIteration waits for the NoOp alone");
  BOOST_TEST(std::count(gate->control_inputs.begin(), gate->control_inputs.end(), report->id) == 1);
  BOOST_TEST(gate->control_inputs.size() > 1u, "the NoOp waits for the saves too");
  Session s(root, SessionOptions{.threads = 2});
  for (int step = 0; step < 3; ++step) {
    auto r = s.run({{x, Tensor::scalar(2.0f)}, {y0, Tensor::scalar(1.5f)}}, {out[1], g[0], g[1]});
    BOOST_TEST(scalar_of(r[0]) == 12.0f);
    BOOST_TEST(scalar_of(r[1]) == 18.0f);  // 3 * 1.5 * 4
    BOOST_TEST(scalar_of(r[2]) == 8.0f);
  }
  BOOST_TEST(settles(s), "the stacks and frames of both loops are freed:\n" << s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(an_rnn_by_while_loop_has_the_gradients_of_the_unrolled_rnn) {
  for (int parallel : {1, 10}) {
    Rnn rnn(parallel);
    Session s(rnn.root);
    std::vector<TensorName> fetches = {rnn.loop_loss, rnn.unrolled_loss};
    for (auto& g : rnn.loop_grads) fetches.push_back(g);
    for (auto& g : rnn.unrolled_grads) fetches.push_back(g);
    auto r = s.run(rnn.feeds(), fetches);
    BOOST_TEST(std::abs(scalar_of(r[0]) - scalar_of(r[1])) < 1e-5f);
    expect_close(r[2], r[5], 1e-5f, "dW");
    expect_close(r[3], r[6], 1e-5f, "db");
    expect_close(r[4], r[7], 1e-5f, "dh0");
    // Central differences on W[0][0].
    const float eps = 1e-2f;
    float up = scalar_of(s.run(rnn.feeds(eps), {rnn.loop_loss})[0]);
    float down = scalar_of(s.run(rnn.feeds(-eps), {rnn.loop_loss})[0]);
    float numeric = (up - down) / (2 * eps);
    BOOST_TEST(std::abs(numeric - r[2].data<float>()[0]) < 2e-3f,
               "dloss/dW00 " << r[2].data<float>()[0] << " vs central difference " << numeric);
    BOOST_TEST(settles(s), s.describe_waiting());
  }
}

BOOST_AUTO_TEST_CASE(an_rnn_by_while_loop_trains) {
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("w"), Shape{3, 3}, DType::float32);
  auto init = ops::assign(root, w, ops::random_normal(root, {3, 3}, DType::float32, 0, 0.5, {.seed = 3}));
  auto h0 = ops::constant(root, Tensor::from_vector<float>({0.1f, -0.2f, 0.3f, 0.5f, 0.4f, -0.1f}, Shape{2, 3}));
  auto target = ops::constant(root, Tensor::from_vector<float>({0.3f, 0.1f, -0.2f, -0.4f, 0.2f, 0.5f}, Shape{2, 3}));
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 4)); },
      [&](const Scope& s, const Vars& v) {
        return Vars{ops::add(s, v[0], i32(s, 1)), ops::tanh(s, ops::matmul(s, v[1], w))};
      },
      {i32(root, 0), h0});
  auto loss = ops::sum(root, ops::square(root, ops::sub(root, out[1], target)));
  auto train = Optimizer::sgd(0.2).minimize(root, loss);
  Session s(root);
  s.run({}, {}, {init});
  float first = scalar_of(s.run({loss})[0]);
  for (int i = 0; i < 60; ++i) s.run({}, {}, {train});
  float last = scalar_of(s.run({loss})[0]);
  BOOST_TEST(last < 0.5f * first, "loss " << first << " -> " << last);
  BOOST_TEST(settles(s), s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(the_gradient_flows_through_a_cond_inside_a_loop) {
  // Four iterations: y = y * x where i is even, y = y + x where it is odd; at x = 2 from
  // y0 = 1: y = 2, 4, 8, 10.
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, Shape{});
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 4)); },
      [&](const Scope& s, const Vars& v) {
        auto even = ops::equal(s, ops::mul(s, ops::div(s, v[0], i32(s, 2)), i32(s, 2)), v[0]);
        auto y = ops::cond(
            s, even, {v[1]}, [&](const Scope& b, const Vars& in) { return Vars{ops::mul(b, in[0], x)}; },
            [&](const Scope& b, const Vars& in) { return Vars{ops::add(b, in[0], x)}; })[0];
        return Vars{ops::add(s, v[0], i32(s, 1)), y};
      },
      {i32(root, 0), ops::constant(root, 1.0f)});
  auto g = gradients(root, {out[1]}, {x});
  Session s(root);
  auto r = s.run({{x, Tensor::scalar(2.0f)}}, {out[1], g[0]});
  BOOST_TEST(scalar_of(r[0]) == 10.0f);
  // y1 = x, y2 = x + x = 2x, y3 = 2x^2, y4 = 2x^2 + x: dy4/dx = 4x + 1 = 9.
  BOOST_TEST(scalar_of(r[1]) == 9.0f);
  BOOST_TEST(settles(s), s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(the_gradient_goes_through_a_loop_inside_a_loop) {
  // for i in [0, 3): for j in [0, i + 1): y = y * x + c   (the inner count depends on i)
  // Six multiplications in all; checked against central differences in x and c.
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, Shape{});
  auto c = ops::placeholder(root, DType::float32, Shape{});
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 3)); },
      [&](const Scope& s, const Vars& v) {
        Output i = v[0];
        auto inner = ops::while_loop(
            s, [&](const Scope& t, const Vars& u) { return ops::less_equal(t, u[0], i); },
            [&](const Scope& t, const Vars& u) {
              return Vars{ops::add(t, u[0], i32(t, 1)), ops::add(t, ops::mul(t, u[1], x), c)};
            },
            {i32(s, 0), v[1]}, {.name = "inner"});
        return Vars{ops::add(s, i, i32(s, 1)), inner[1]};
      },
      {i32(root, 0), ops::constant(root, 1.0f)}, {.parallel_iterations = 4, .name = "outer"});
  auto g = gradients(root, {out[1]}, {x, c});
  Session s(root);
  auto y = [&](float xv, float cv) {
    return scalar_of(s.run({{x, Tensor::scalar(xv)}, {c, Tensor::scalar(cv)}}, {out[1]})[0]);
  };
  auto r = s.run({{x, Tensor::scalar(1.1f)}, {c, Tensor::scalar(0.3f)}}, {out[1], g[0], g[1]});
  // By hand: y_{k+1} = y_k x + c six times from y_0 = 1: dy/dc = sum of x^k for k < 6.
  // and dy/dx by d_{k+1} = d_k x + y_k.
  float expect_y = 1.0f, dc = 0.0f, dx_by_hand = 0.0f;
  for (int k = 0; k < 6; ++k) {
    dx_by_hand = dx_by_hand * 1.1f + expect_y;
    expect_y = expect_y * 1.1f + 0.3f;
    dc = dc * 1.1f + 1.0f;
  }
  BOOST_TEST(std::abs(scalar_of(r[0]) - expect_y) < 1e-5f);
  BOOST_TEST(std::abs(scalar_of(r[1]) - dx_by_hand) < 1e-4f, "dy/dx " << scalar_of(r[1]) << " vs " << dx_by_hand);
  BOOST_TEST(std::abs(scalar_of(r[2]) - dc) < 1e-4f, "dy/dc " << scalar_of(r[2]) << " vs " << dc);
  const float eps = 1e-2f;
  float dx = (y(1.1f + eps, 0.3f) - y(1.1f - eps, 0.3f)) / (2 * eps);
  BOOST_TEST(std::abs(scalar_of(r[1]) - dx) < 2e-2f, "dy/dx " << scalar_of(r[1]) << " vs central difference " << dx);
  BOOST_TEST(settles(s), "every saved value was taken:\n" << s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(the_gradient_of_an_inner_loop_alone_is_refused_naming_the_outer_one) {
  // Once the outer loop is built, the inner loop's result lives in the outer frame: its gradient
  // is built only as part of the outer loop's.
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, Shape{});
  Output inner_result;
  ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 2)); },
      [&](const Scope& s, const Vars& v) {
        auto inner = ops::while_loop(
            s, [](const Scope& t, const Vars& u) { return ops::less(t, u[0], i32(t, 2)); },
            [&](const Scope& t, const Vars& u) { return Vars{ops::add(t, u[0], i32(t, 1)), ops::mul(t, u[1], x)}; },
            {i32(s, 0), v[1]}, {.name = "inner"});
        inner_result = inner[1];
        return Vars{ops::add(s, v[0], i32(s, 1)), inner[1]};
      },
      {i32(root, 0), ops::constant(root, 1.0f)}, {.name = "outer"});
  auto m = error_of([&] { gradients(root, {inner_result}, {x}); }, ErrorCode::unimplemented);
  BOOST_TEST(contains(m, "while loop 'outer/body/inner'"), m);
  BOOST_TEST(contains(m, "inside another ('outer') is built only within the gradient of the outer loop"), m);
}

BOOST_AUTO_TEST_CASE(an_edge_into_a_loop_that_bypasses_enter_is_refused) {
  auto root = Scope::root();
  Output inside;
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 3)); },
      [&](const Scope& s, const Vars& v) {
        inside = ops::add(s.with_op_name("step"), v[0], i32(s, 1));
        return Vars{inside};
      },
      {i32(root, 0)});
  auto after = ops::identity(root.with_control_dependencies(std::vector<Output>{inside}).with_op_name("after"), out[0]);
  Session s(root);
  auto m = error_of([&] { s.run({after}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "Identity 'after' outside any loop has a control input from Add 'while/body/step' in while loop 'while'"), m);
}

BOOST_AUTO_TEST_CASE(a_loop_survives_graphdef_export_and_import_and_is_differentiated_there) {
  // The factorial loop (with an invariant: n), through bytes and back, runs and differentiates
  // in the imported graph: y = y0 * x^3 by a loop of three products.
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, Shape{});
  auto y0 = ops::placeholder(root.with_op_name("y0"), DType::float32, Shape{});
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 3)); },
      [&](const Scope& s, const Vars& v) { return Vars{ops::add(s, v[0], i32(s, 1)), ops::mul(s, v[1], x)}; },
      {i32(root, 0), y0}, {.name = "power"});
  ops::identity(root.with_op_name("y"), out[1]);
  auto bytes = graph_to_bytes(root.graph());
  auto imported = graph_from_bytes(bytes.data(), bytes.size());
  Scope s2(imported);
  Output y(const_cast<Node*>(imported->find("y")));
  Output x2(const_cast<Node*>(imported->find("x"))), y02(const_cast<Node*>(imported->find("y0")));
  auto g = gradients(s2, {y}, {x2, y02});
  Session s(s2);
  auto r = s.run({{"x", Tensor::scalar(2.0f)}, {"y0", Tensor::scalar(1.5f)}}, {y, g[0], g[1]});
  BOOST_TEST(scalar_of(r[0]) == 12.0f);
  BOOST_TEST(scalar_of(r[1]) == 18.0f);
  BOOST_TEST(scalar_of(r[2]) == 8.0f);
}

BOOST_AUTO_TEST_CASE(steps_running_the_same_loop_at_once_keep_their_frames_apart) {
  Factorial f;
  Session s(f.root);
  std::vector<std::future<int32_t>> runs;
  for (int32_t n = 1; n <= 8; ++n)
    runs.push_back(std::async(std::launch::async, [&s, &f, n] {
      int32_t last = 0;
      for (int k = 0; k < 20; ++k)
        last = s.run({{f.n, Tensor::scalar<int32_t>(n)}}, {f.out[1]})[0].scalar_value<int32_t>();
      return last;
    }));
  int32_t factorial = 1;
  for (int32_t n = 1; n <= 8; ++n) {
    factorial *= n;
    BOOST_TEST(runs[std::size_t(n - 1)].get() == factorial, "n = " << n);
  }
  BOOST_TEST(settles(s), s.describe_waiting());
}
