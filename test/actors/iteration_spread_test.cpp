// The iterations of a while loop spread over the workers (node.hpp, NodeActor::spread): a loop
// that lets iterations overlap and carries only small values runs each iteration on one worker,
// the iterations over all of them; a loop that carries a large value, or runs one iteration at a
// time, does not spread.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "actors/executor/executable.hpp"
#include "actors/executor/node.hpp"
#include "actors/state/param_shard.hpp"
#include "actors/runtime.hpp"
#include "actors/session.hpp"
#include "ops/all.hpp"
#include "test/support/scratch_dir.hpp"
#include "test/support/settles.hpp"
#include "test/support/skip.hpp"
#include "test/support/spread.hpp"

using namespace troupe;
using troupe::testing::ScratchDir;
using troupe::testing::settles;
using json = nlohmann::json;

namespace {

using Vars = std::vector<Output>;

// The preconditions: a loop within one partition (the *_spread runs place its nodes on three
// devices, and a loop that spans devices does not spread), and a second worker thread.
std::string why_the_loop_spans_devices() {
  return troupe::testing::spread() ? "the graphs are spread over several devices (TROUPE_PLACEMENT=alternate): the "
                                     "loop spans devices, and only a loop within one partition spreads"
                                   : "";
}
std::string why_one_worker() {
  return Runtime::get(0)->threads() < 2 ? "one worker thread: nothing to spread over or hand anything to" : "";
}

// A loop of n iterations whose body works on a 32x32 matrix: from the counter alone
// (independent iterations), or from the matrix the last iteration made (carried).
struct WorkLoop {
  Scope root = Scope::root();
  Output n = ops::placeholder(root.with_op_name("n"), DType::int32, Shape{});
  Output a;
  std::vector<Output> out;
  WorkLoop(bool carried, int parallel) {
    std::vector<float> values(32 * 32, 0.25f);
    a = ops::constant(root.with_op_name("a"), Tensor::from_vector<float>(values, Shape{32, 32}));
    out = ops::while_loop(
        root, [&](const Scope& s, const Vars& v) { return ops::less(s, v[0], n); },
        [&](const Scope& s, const Vars& v) {
          auto next = ops::add(s, v[0], ops::constant(s, int32_t(1)));
          auto base = carried ? v[1] : ops::add(s, a, ops::cast(s, v[0], DType::float32));
          auto x = ops::tanh(s.with_op_name("work"), base);
          ops::sum(s, ops::square(s, x));
          return carried ? Vars{next, x} : Vars{next};
        },
        carried ? Vars{ops::constant(root, int32_t(0)), a} : Vars{ops::constant(root, int32_t(0))},
        {.parallel_iterations = parallel});
  }
};

// Spreads every loop that may spread, whatever its iterations cost, while alive.
struct SpreadAlways {
  SpreadAlways() { NodeActor::set_spread_ticks(0); }
  ~SpreadAlways() { NodeActor::set_spread_ticks(-1); }
};

// Calls f with the executable of the loop's signature (its actors spawned, no step run).
template <class F>
void with_executable(WorkLoop& l, F&& f) {
  auto runtime = Runtime::get(0);
  auto shard = runtime->system().spawn(param_shard);
  {
    Executable exe(runtime->system(), l.root.graph(), {l.n.endpoint()}, {l.out[0].endpoint()}, {},
                   [&](const std::string&) { return shard; }, {.runtime = runtime.get()});
    f(exe);
  }
  caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
}

// Whether the executable of the loop's signature spreads the loop, and the node "work" with it;
// nothing when the loop spans devices (the *_spread run places nodes on three CPU devices in
// turn), where a partition that receives values inside the loop does not spread it.
std::optional<bool> spreads(WorkLoop& l) {
  std::optional<bool> spread = false;
  with_executable(l, [&](const Executable& exe) {
    if (exe.parts().size() > 1) spread.reset();
    for (auto& part : exe.parts()) {
      if (!spread) {
        BOOST_TEST(part->spreads.empty(), "a loop over " << exe.parts().size() << " devices does not spread");
        continue;
      }
      for (const NodePlan& np : part->nodes) {
        const bool work = np.node->name.find("work") != std::string::npos;
        if (work && np.spread) *spread = true;
        if (np.kind == NodeKind::enter) BOOST_TEST(!np.spread, np.where() << ": an Enter stays where its values come");
      }
      BOOST_TEST(part->spreads.size() == (*spread ? 1u : 0u));
    }
  });
  return spread;
}

// The ops of the loop's side nodes (NodePlan::side); nothing when the loop spans devices.
std::optional<std::multiset<std::string>> side_ops(WorkLoop& l) {
  std::optional<std::multiset<std::string>> ops;
  with_executable(l, [&](const Executable& exe) {
    if (exe.parts().size() != 1) return;
    ops.emplace();
    for (const NodePlan& np : exe.parts()[0]->nodes)
      if (np.side) ops->insert(np.node->op);
  });
  return ops;
}

// Test ops that pass their input on, noting the thread of each firing: TestMark at once (a
// cheap node), TestBusy after keeping its thread busy for 20 us (an expensive node, as an RNN's
// cell on its state).
std::mutex marks_mutex;
std::map<std::string, std::vector<std::thread::id>> marks;  // by op

template <int kBusyMicroseconds>
class MarkKernel final : public OpKernel {
 public:
  explicit MarkKernel(const Node& node) : op_(node.op) {}
  void compute(KernelContext& ctx) override {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(kBusyMicroseconds);
    while (std::chrono::steady_clock::now() < until) {
    }
    {
      std::lock_guard lock(marks_mutex);
      marks[op_].push_back(std::this_thread::get_id());
    }
    ctx.set_output(0, ctx.input(0));
  }

 private:
  std::string op_;
};
TROUPE_REGISTER_OP(OpDef{.name = "TestMark", .num_inputs = 1,
                         .shape_fn = shape_fns::unchanged});
TROUPE_REGISTER_KERNEL("TestMark", DeviceType::cpu, MarkKernel<0>);
TROUPE_REGISTER_OP(OpDef{.name = "TestBusy", .num_inputs = 1,
                         .shape_fn = shape_fns::unchanged});
TROUPE_REGISTER_KERNEL("TestBusy", DeviceType::cpu, MarkKernel<20>);

}  // namespace

BOOST_AUTO_TEST_CASE(a_loop_that_carries_a_large_value_marks_the_work_its_next_iteration_does_not_wait_for_as_side_work,
                     *troupe::testing::runs_here(why_the_loop_spans_devices)) {
  WorkLoop carried(true, 10), carried_one_at_a_time(true, 1), independent(false, 10);
  const auto side = side_ops(carried);
  BOOST_TEST_REQUIRE(side.has_value(), "the loop spans devices, unspread");
  // tanh(X) is the next iteration's X: the chain; its square and their sum are beside it (the
  // sum, the body's one sink, is the iteration's gate that iteration k + parallel_iterations
  // waits for: it is still side work).
  BOOST_TEST((*side == std::multiset<std::string>{"Square", "Sum"}));
  BOOST_TEST(side_ops(carried_one_at_a_time)->empty(), "parallel_iterations 1: no iteration overlaps the next");
  BOOST_TEST(side_ops(independent)->empty(), "a loop that spreads its iterations spreads that work with them");
}

BOOST_AUTO_TEST_CASE(only_a_loop_that_lets_iterations_overlap_and_carries_small_values_spreads_them,
                     *troupe::testing::runs_here(why_the_loop_spans_devices)) {
  WorkLoop independent(false, 10), one_at_a_time(false, 1), carried(true, 10);
  const auto independent_spreads = spreads(independent);
  BOOST_TEST_REQUIRE(independent_spreads.has_value(), "the loop spans devices, unspread");
  BOOST_TEST(*independent_spreads);
  BOOST_TEST(!*spreads(one_at_a_time), "parallel_iterations 1: nothing to spread");
  BOOST_TEST(!*spreads(carried), "a 4 KiB matrix carried to the next iteration stays on one core");
}

BOOST_AUTO_TEST_CASE(each_iteration_of_a_spread_loop_runs_on_one_worker_and_the_iterations_on_every_worker,
                     *troupe::testing::runs_here(why_one_worker) *
                         troupe::testing::runs_here(why_the_loop_spans_devices)) {
  auto runtime = Runtime::get(0);
  SpreadAlways always;
  ScratchDir dir;
  WorkLoop l(false, 10);
  BOOST_TEST_REQUIRE(spreads(l).has_value(), "the loop spans devices, unspread");
  constexpr int kIterations = 64;
  {
    Session s(l.root, {.trace = {.file = dir.file("trace.json"), .first_step = 2, .last_step = 2}});
    for (int step = 0; step < 2; ++step)
      BOOST_TEST(s.run({{l.n, Tensor::scalar<int32_t>(kIterations)}}, {l.out[0]})[0].scalar_value<int32_t>() ==
                 kIterations);
    BOOST_TEST(settles(s), s.describe_waiting());
  }
  std::ifstream in(dir.file("trace.json"));
  BOOST_TEST_REQUIRE(in.good());
  const json trace = json::parse(in);
  std::map<int64_t, std::set<int64_t>> rows_of;  // iteration -> the rows (threads) its kernels ran on
  int kernels = 0;
  for (auto& e : trace["traceEvents"])
    if (e.value("ph", "") == "X" && e.value("cat", "") == "kernel" && e["args"].contains("frame")) {
      rows_of[e["args"].value("iteration", int64_t(0))].insert(e["tid"].get<int64_t>());
      ++kernels;
    }
  BOOST_TEST_REQUIRE(int(rows_of.size()) >= kIterations, kernels << " kernels in the loop");
  std::map<int64_t, int> iterations_of;  // row (thread) -> the iterations that ran there
  for (auto& [iteration, rows] : rows_of) {
    BOOST_TEST(rows.size() == 1u, "iteration " << iteration << " ran on " << rows.size() << " threads");
    ++iterations_of[*rows.begin()];
  }
  // Each iteration goes to the worker with fewer unfinished (FrameTable::iteration_worker): at
  // least one of the first two goes to each, whatever their speeds.
  BOOST_TEST(iterations_of.size() >= 2u, "the iterations ran on " << iterations_of.size() << " thread(s)");
}

BOOST_AUTO_TEST_CASE(a_spread_loops_kernels_get_an_actor_per_worker_and_every_iteration_reaches_one) {
  // A stateless kernel of the loop that the next iteration does not wait for gets one actor per
  // worker, each taking the iterations that run on its worker (NodePlan::replicas); a
  // stateful one (a random generator), or one the next iteration waits for, keeps one actor.
  auto runtime = Runtime::get(0);
  const int workers = runtime->threads();
  Scope root = Scope::root();
  Output n = ops::placeholder(root.with_op_name("n"), DType::int32, Shape{});
  Output total = ops::variable(root.with_op_name("total"), ops::constant(root, 0.0f));
  Output init = ops::assign(root, total, ops::constant(root, 0.0f));
  Output read = ops::read_variable(root, total);
  auto out = ops::while_loop(
      root, [&](const Scope& s, const Vars& v) { return ops::less(s, v[0], n); },
      [&](const Scope& s, const Vars& v) {
        Output k = ops::cast(s, v[0], DType::float32);
        ops::assign_add(s, total, ops::mul(s.with_op_name("square"), k, k));
        ops::random_uniform(s.with_op_name("noise"), Shape{2});
        return Vars{ops::add(s.with_op_name("next"), v[0], ops::constant(s, int32_t(1)))};
      },
      Vars{ops::constant(root, int32_t(0))}, {.parallel_iterations = 10});
  {
    auto shard = runtime->system().spawn(param_shard);
    Executable exe(runtime->system(), root.graph(), {n.endpoint()}, {out[0].endpoint()}, {},
                   [&](const std::string&) { return shard; }, {.runtime = runtime.get()});
    if (exe.parts().size() > 1) {
      BOOST_TEST_MESSAGE("the loop spans devices: no partition spreads it, nothing replicated");
      for (auto& part : exe.parts()) BOOST_TEST(part->actors.size() == part->nodes.size());
    } else {
      const ExecPlan& part = *exe.parts()[0];
      std::size_t extra = 0;
      std::map<std::string, int> replicas;  // by the name given in the body
      for (const NodePlan& np : part.nodes) {
        for (const char* name : {"square", "noise", "next"})
          if (np.node->name.find(name) != std::string::npos) replicas[name] = np.replicas;
        extra += std::size_t(np.replicas - 1);
        if (np.replicas > 1) BOOST_TEST(np.replica_nodes.size() == std::size_t(np.replicas));
      }
      const int expected = workers > 1 ? workers : 1;
      BOOST_TEST(replicas["square"] == expected);
      BOOST_TEST(replicas["noise"] == 1, "a random generator's sequence is one actor's");
      BOOST_TEST(replicas["next"] == 1, "the next iteration waits for the counter");
      BOOST_TEST(part.actors.size() == part.nodes.size() + extra);
    }
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  }
  // Every iteration's square reaches the sum, spread or not, over several steps.
  for (bool always : {false, true}) {
    std::optional<SpreadAlways> spread;
    if (always) spread.emplace();
    Session s(root);
    s.run({}, {}, {init});
    constexpr int kIterations = 200;
    constexpr float kSum = float((kIterations - 1) * kIterations * (2 * kIterations - 1) / 6);
    for (int step = 1; step <= 3; ++step) {
      BOOST_TEST(s.run({{n, Tensor::scalar<int32_t>(kIterations)}}, {out[0]})[0].scalar_value<int32_t>() == kIterations);
      BOOST_TEST(s.run({}, {read})[0].scalar_value<float>() == step * kSum,
                 "step " << step << (always ? ", spread" : ""));
    }
    BOOST_TEST(settles(s), s.describe_waiting());
  }
}

BOOST_AUTO_TEST_CASE(a_loops_expensive_node_stays_on_the_worker_that_made_its_input_while_nothing_else_waits_there,
                     *troupe::testing::runs_here(why_one_worker) *
                         troupe::testing::runs_here(why_the_loop_spans_devices)) {
  // A loop carries a 256 KiB state through an expensive kernel, one iteration at a time. With
  // nothing else waiting on the worker that made the kernel's input, the kernel runs there: on
  // the other worker it would read the state from this core's cache, and the loop's chain went
  // on over there (measured: an RNN's chain went from core to core every iteration, each 1.5
  // times as long as on one core).
  auto runtime = Runtime::get(0);
  Scope root = Scope::root();
  Output n = ops::placeholder(root.with_op_name("n"), DType::int32, Shape{});
  Output x0 =
      ops::constant(root, Tensor::from_vector<float>(std::vector<float>(256 * 256, 0.5f), Shape{256, 256}));
  auto out = ops::while_loop(
      root, [&](const Scope& s, const Vars& v) { return ops::less(s, v[0], n); },
      [&](const Scope& s, const Vars& v) {
        Output made(&s.add("TestMark", {ops::add(s, v[1], ops::constant(s, 0.01f))}));
        Output x(&s.add("TestBusy", {made}));
        return Vars{ops::add(s, v[0], ops::constant(s, int32_t(1))), x};
      },
      Vars{ops::constant(root, int32_t(0)), x0}, {.parallel_iterations = 1});
  {
    auto shard = runtime->system().spawn(param_shard);
    Executable exe(runtime->system(), root.graph(), {n.endpoint()}, {out[1].endpoint()}, {},
                   [&](const std::string&) { return shard; }, {.runtime = runtime.get()});
    const bool one_part = exe.parts().size() == 1;
    caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
    BOOST_TEST_REQUIRE(one_part, "the loop spans devices, unspread");
  }
  // Handed over, the kernel went to the other worker only when that one was awake looking for
  // work, and from then on in every iteration: many steps, so that some step meets it awake.
  constexpr int kIterations = 100;
  constexpr int kSteps = 20;
  Session s(root);
  s.run({{n, Tensor::scalar<int32_t>(2)}}, {out[1]});  // the kernels' costs are known from here on
  for (int step = 0; step < kSteps; ++step) {
    {
      std::lock_guard lock(marks_mutex);
      marks.clear();
    }
    BOOST_TEST(s.run({{n, Tensor::scalar<int32_t>(kIterations)}}, {out[1]})[0].shape() == Shape({256, 256}));
    std::lock_guard lock(marks_mutex);
    const auto& made = marks["TestMark"];
    const auto& busy = marks["TestBusy"];
    BOOST_TEST_REQUIRE(int(made.size()) == kIterations);
    BOOST_TEST_REQUIRE(int(busy.size()) == kIterations);
    int moved = 0;  // iterations whose expensive kernel ran on another thread than its input was made on
    for (int i = 0; i < kIterations; ++i) moved += busy[std::size_t(i)] != made[std::size_t(i)];
    // It may still move now and then (a job of the step actor's queued on its worker, another
    // process on the core), each time once: it stays where it went.
    BOOST_TEST(moved <= kIterations / 4, "step " << step << ": " << moved << " of " << kIterations
                                                   << " iterations ran it on another thread");
  }
  BOOST_TEST(settles(s), s.describe_waiting());
}
