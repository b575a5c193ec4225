// Two host CPU devices (TROUPE_CPU_DEVICES=2, as TensorFlow's device_count {'CPU': 2}): a loop
// whose body spans both exchanges values through _Send/_Recv pairs inside the loop's frame,
// which carry the frame and iteration; results, errors and gradients are as on one device.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <cstdlib>
#include <map>
#include <set>

#include "actors/executor/executable.hpp"
#include "actors/state/param_shard.hpp"
#include "actors/runtime.hpp"
#include "actors/session.hpp"
#include "graph/gradients.hpp"
#include "graph/partition.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/settles.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;
using troupe::testing::settles;

namespace {

// Before anything builds the device registry (it is made on first use).
const bool two_cpus = [] { return setenv("TROUPE_CPU_DEVICES", "2", 1) == 0; }();

using Vars = std::vector<Output>;
const char* kCpu1 = "/job:localhost/task:0/device:CPU:1";

// sum over i in [0, n) of 2 i: the doubling runs on CPU:1, the sum on CPU:0.
struct SplitLoop {
  Scope root = Scope::root();
  Output n = ops::placeholder(root.with_op_name("n"), DType::int32, Shape{});
  std::vector<Output> out = ops::while_loop(
      root, [&](const Scope& s, const Vars& v) { return ops::less(s, v[0], n); },
      [](const Scope& s, const Vars& v) {
        auto twice = ops::mul(s.with_device(kCpu1).with_op_name("twice"), v[0], ops::constant(s, 2));
        return Vars{ops::add(s, v[0], ops::constant(s, 1)), ops::add(s, v[1], twice)};
      },
      {ops::constant(root, 0), ops::constant(root, 0)});
};

}  // namespace

BOOST_AUTO_TEST_CASE(troupe_cpu_devices_makes_host_cpu_devices) {
  BOOST_REQUIRE(two_cpus);
  const auto& r = DeviceRegistry::instance();
  BOOST_REQUIRE(r.find(kCpu1) != nullptr);
  BOOST_TEST(r.find(kCpu1)->type() == DeviceType::cpu);
  BOOST_TEST(contains(r.find(kCpu1)->description(), "virtual device 1 of 2"));
}

BOOST_AUTO_TEST_CASE(a_loop_whose_body_spans_two_devices_sends_its_values_inside_the_frame) {
  SplitLoop l;
  Session s(l.root);
  BOOST_TEST(s.run({{l.n, Tensor::scalar<int32_t>(10)}}, {l.out[1]})[0].scalar_value<int32_t>() == 90);
  BOOST_TEST(s.run({{l.n, Tensor::scalar<int32_t>(0)}}, {l.out[1]})[0].scalar_value<int32_t>() == 0);
  BOOST_TEST(settles(s), s.describe_waiting());

  // The executable runs one partition per device; a _Send/_Recv pair with one rendezvous key
  // carries each value between them, inside the loop's frame, and each partition runs a
  // control loop of its own for the frame.
  auto runtime = Runtime::get(0);
  auto shard = runtime->system().spawn(param_shard);
  {
    Executable exe(runtime->system(), l.root.graph(), {l.n.endpoint()}, {l.out[1].endpoint()}, {},
                   [&](const std::string&) { return shard; },
                   {.runtime = runtime.get()});
    BOOST_TEST_REQUIRE(exe.parts().size() == 2u);
    std::map<std::string, std::string> sent, received;  // rendezvous key -> device
    for (auto& part : exe.parts()) {
      const Graph& g = *part->graph;
      int control_loops = 0;
      for (int id = 0; id < g.size(); ++id) {
        const Node& node = g.node(id);
        if (node.op == "Enter" && node.name.find("_control_loop") != std::string::npos) ++control_loops;
        if (node.op != "_Send" && node.op != "_Recv") continue;
        BOOST_TEST(loop_frame(node) == "while", node.name << " is in the loop");
        (node.op == "_Send" ? sent : received)[rendezvous_key(node)] = part->device;
        BOOST_TEST((part->nodes[id].kind == (node.op == "_Send" ? NodeKind::send : NodeKind::recv)),
                   node.name << " has an actor of its own kind, which runs no kernel");
      }
      BOOST_TEST(control_loops == 1, part->device << " runs a control loop for the frame");
    }
    BOOST_TEST(sent.size() == received.size());
    for (auto& [key, device] : received) {
      BOOST_TEST_REQUIRE(sent.count(key), key << " is sent");
      BOOST_TEST(sent[key] != device, key << ": a Recv is on another device than its Send");
    }
    const std::string twice_back = "/job:localhost/task:0/device:CPU:1;/job:localhost/task:0/device:CPU:0;while/body/twice:0";
    BOOST_TEST(received.count(twice_back), "the doubled value goes back to CPU:0");
  }
  caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(an_error_on_the_second_device_names_it_the_frame_and_the_iteration) {
  auto root = Scope::root();
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], ops::constant(s, 10)); },
      [](const Scope& s, const Vars& v) {
        auto q = ops::div(s.with_device(kCpu1).with_op_name("quotient"), ops::constant(s, 6),
                          ops::sub(s, ops::constant(s, 3), v[0]));
        return Vars{ops::add(s, v[0], ops::constant(s, 1)), ops::add(s, v[1], q)};
      },
      {ops::constant(root, 0), ops::constant(root, 0)});
  Session s(root);
  auto m = error_of([&] { s.run({out[1]}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "Div 'while/body/quotient' on /job:localhost/task:0/device:CPU:1 in frame 'while' iteration 3"),
             m);
}

BOOST_AUTO_TEST_CASE(the_gradient_of_a_loop_spanning_two_devices) {
  // y = y0 * x^3, the product on CPU:1.
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, Shape{});
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], ops::constant(s, 3)); },
      [&](const Scope& s, const Vars& v) {
        return Vars{ops::add(s, v[0], ops::constant(s, 1)), ops::mul(s.with_device(kCpu1), v[1], x)};
      },
      {ops::constant(root, 0), ops::constant(root, 1.5f)});
  auto g = gradients(root, {out[1]}, {x});
  Session s(root);
  auto r = s.run({{x, Tensor::scalar(2.0f)}}, {out[1], g[0]});
  BOOST_TEST(r[0].scalar_value<float>() == 12.0f);
  BOOST_TEST(r[1].scalar_value<float>() == 18.0f);
  BOOST_TEST(settles(s), s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(a_device_leaves_a_gradient_loops_frame_only_after_its_stack_pops) {
  // y = tanh(...tanh(tanh(y0) x) x...) x, three times, with tanh on CPU:1: the values its
  // gradient saves live on CPU:1, so the gradient loop's StackPops run there, next to no Exit of
  // that loop. CPU:1's control loop must not leave the frame (and forget it) before the pops of
  // every iteration have looked their iteration up in it: the gradient's counter runs ahead of
  // its body, and the last LoopCond can reach CPU:1 before an earlier pop has run.
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, Shape{});
  auto y0 = ops::placeholder(root.with_op_name("y0"), DType::float32, Shape{});
  auto step = [&](const Scope& s, Output y) { return ops::mul(s, ops::tanh(s.with_device(kCpu1), y), x); };
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], ops::constant(s, 3)); },
      [&](const Scope& s, const Vars& v) { return Vars{ops::add(s, v[0], ops::constant(s, 1)), step(s, v[1])}; },
      {ops::constant(root, 0), y0});
  auto g = gradients(root, {out[1]}, {x, y0});
  auto unrolled = step(root, step(root, step(root, y0)));
  auto unrolled_g = gradients(root, {unrolled}, {x, y0});

  auto runtime = Runtime::get(0);
  auto shard = runtime->system().spawn(param_shard);
  {
    Executable exe(runtime->system(), root.graph(), {x.endpoint(), y0.endpoint()}, {g[0].endpoint(), g[1].endpoint()},
                   {}, [&](const std::string&) { return shard; }, {.runtime = runtime.get()});
    int pops_checked = 0;
    for (auto& part : exe.parts()) {
      const Graph& pg = *part->graph;
      for (int id = 0; id < pg.size(); ++id) {
        const Node& exit = pg.node(id);
        if (exit.op != "Exit" || exit.name.find("_control_loop") == std::string::npos) continue;
        const std::string& frame = loop_frame(pg.node(exit.inputs[0].node));
        std::set<int> before;  // what the Exit waits for through control edges
        std::vector<int> todo(exit.control_inputs.begin(), exit.control_inputs.end());
        while (!todo.empty()) {
          int c = todo.back();
          todo.pop_back();
          if (before.insert(c).second) todo.insert(todo.end(), pg.node(c).control_inputs.begin(), pg.node(c).control_inputs.end());
        }
        for (int p = 0; p < pg.size(); ++p) {
          if (pg.node(p).op != "StackPop" || loop_frame(pg.node(p)) != frame) continue;
          BOOST_TEST(before.count(p), exit.name << " on " << part->device << " waits for " << pg.node(p).name);
          ++pops_checked;
        }
      }
    }
    BOOST_TEST(pops_checked > 0, "CPU:1 runs StackPops of the gradient loop and a control loop for it");
  }
  caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);

  Session s(root);
  for (int i = 0; i < 20; ++i) {
    auto r = s.run({{x, Tensor::scalar(0.5f + 0.1f * float(i))}, {y0, Tensor::scalar(1.5f)}},
                   {g[0], g[1], unrolled_g[0], unrolled_g[1]});
    BOOST_TEST(std::abs(r[0].scalar_value<float>() - r[2].scalar_value<float>()) < 1e-5f, "dy/dx, run " << i);
    BOOST_TEST(std::abs(r[1].scalar_value<float>() - r[3].scalar_value<float>()) < 1e-5f, "dy/dy0, run " << i);
  }
  BOOST_TEST(settles(s), s.describe_waiting());
}
