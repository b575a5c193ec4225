// Executor tests in the style of TensorFlow's executor_test: tiny graphs built with the public
// builder and driven through a real Session.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <future>
#include <map>
#include <optional>
#include <thread>

#include "actors/executor/executable.hpp"
#include "actors/executor/kernel_node.hpp"
#include "actors/executor/mailbox.hpp"
#include "actors/state/param_shard.hpp"
#include "actors/runtime.hpp"
#include "actors/session.hpp"
#include "core/huge_pages.hpp"
#include "devices/cpu_threads.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/skip.hpp"
#include "test/support/settles.hpp"
#include "test/support/spread.hpp"

using namespace troupe;
using troupe::testing::settles;
using troupe::testing::spread;
using troupe::testing::contains;

BOOST_AUTO_TEST_CASE(a_simple_add_computes_its_sum) {
  auto root = Scope::root();
  auto a = ops::placeholder(root, DType::float32, {});
  auto b = ops::placeholder(root, DType::float32, {});
  auto c = ops::add(root, a, b);
  Session s(root);
  auto out = s.run({{a, Tensor::scalar(1.5f)}, {b, Tensor::scalar(2.25f)}}, {c});
  BOOST_TEST(out[0].scalar_value<float>() == 3.75f);
}

BOOST_AUTO_TEST_CASE(a_diamond_joins_both_branches) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float64, {3});
  auto left = ops::square(root, x);
  auto right = ops::neg(root, x);
  auto join = ops::add(root, left, right);
  Session s(root);
  auto out = s.run({{x, Tensor::from_vector<double>({1, 2, 3})}}, {join, left});
  BOOST_TEST(out[0].to_vector<double>() == std::vector<double>({0, 2, 6}), boost::test_tools::per_element());
  BOOST_TEST(out[1].to_vector<double>() == std::vector<double>({1, 4, 9}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(control_edges_order_a_read_after_an_assign) {
  auto root = Scope::root();
  auto v = ops::variable(root.with_op_name("v"), {}, DType::float32);
  auto set = ops::assign(root, v, ops::constant(root, 7.0f));
  // The read waits for the assign through a control edge, so it sees 7 on the first run.
  auto read = ops::read_variable(root.with_control_dependencies(std::vector<Output>{set}), v);
  Session s(root);
  BOOST_TEST(s.run({read})[0].scalar_value<float>() == 7.0f);
}

BOOST_AUTO_TEST_CASE(a_target_runs_without_being_fetched) {
  auto root = Scope::root();
  auto v = ops::variable(root.with_op_name("v"), {2}, DType::int32);
  auto init = ops::assign(root, v, ops::constant<int32_t>(root, {1, 2}, {2}));
  auto bump = ops::assign_add(root, v, ops::constant<int32_t>(root, {10, 10}, {2}));
  Session s(root);
  s.run({}, {}, {init});
  s.run({}, {}, {bump});
  s.run({}, {}, {bump});
  BOOST_TEST(s.run({v})[0].to_vector<int32_t>() == std::vector<int32_t>({21, 22}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_kernel_error_aborts_the_step_and_names_node_op_device_and_cause) {
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::int32, {});
  auto slow = ops::matmul(root, ops::random_normal(root, {256, 256}), ops::random_normal(root, {256, 256}));
  auto bad = ops::div(root.with_op_name("bad_div"), ops::constant(root, 1), x);
  auto join = ops::add(root.with_op_name("join"), ops::cast(root, bad, DType::float32), ops::sum(root, slow));
  Session s(root);
  try {
    s.run({{x, Tensor::scalar<int32_t>(0)}}, {join});
    BOOST_FAIL("expected the step to fail");
  } catch (const Error& e) {
    std::string m = e.what();
    BOOST_TEST(e.code() == ErrorCode::invalid_argument);
    BOOST_TEST(contains(m, "Div 'bad_div'"), m);
    BOOST_TEST(contains(m, "Div 'bad_div' on /job:localhost/task:0/device:CPU:"), m);
    // Spread, the placer hands bad_div any of the CPUs; otherwise it runs on the default one.
    if (!spread()) BOOST_TEST(contains(m, "device:CPU:0"), m);
    BOOST_TEST(contains(m, "division by zero"), m);
  }
  BOOST_TEST(settles(s), "state of the failed step is freed everywhere");
  // The session is still usable, and the same executable runs the next step.
  auto out = s.run({{x, Tensor::scalar<int32_t>(2)}}, {join});
  BOOST_TEST(std::isfinite(out[0].scalar_value<float>()));
  BOOST_TEST(s.num_executables() == 1);
}

BOOST_AUTO_TEST_CASE(a_feed_in_the_middle_replaces_a_computed_tensor) {
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, {});
  auto h = ops::mul(root.with_op_name("h"), x, ops::constant(root, 100.0f));
  auto y = ops::add(root.with_op_name("y"), h, ops::constant(root, 1.0f));
  Session s(root);
  BOOST_TEST(s.run({{x, Tensor::scalar(2.0f)}}, {y})[0].scalar_value<float>() == 201.0f);
  // Feeding h needs no x at all.
  BOOST_TEST(s.run({{"h:0", Tensor::scalar(5.0f)}}, {y})[0].scalar_value<float>() == 6.0f);
  // A fetched tensor that is also fed comes back as fed.
  BOOST_TEST(s.run({{h, Tensor::scalar(3.0f)}}, {h})[0].scalar_value<float>() == 3.0f);
}

BOOST_AUTO_TEST_CASE(concurrent_steps_from_many_threads_each_get_their_own_result) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float64, {});
  Output y = x;
  for (int i = 0; i < 200; ++i) y = ops::add(root, ops::mul(root, y, ops::constant(root, 1.0)), ops::constant(root, 1.0));
  Session s(root, {.max_steps_in_flight = 4});
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 25; ++i) {
        double start = t * 1000 + i;
        auto out = s.run({{x, Tensor::scalar(start)}}, {y});
        if (out[0].scalar_value<double>() != start + 200) ++wrong;
      }
    });
  }
  for (auto& th : threads) th.join();
  BOOST_TEST(wrong.load() == 0);
  BOOST_TEST(s.steps_in_flight() == 0);
  BOOST_TEST(settles(s));
}

// A kernel node's inputs of a tag wait in its mailbox, unclaimed, until the last one comes
// (NodeMailbox::Deferral): a wait report asked meanwhile counts them as received, and those of
// an aborted step are gone before the next step's come.
BOOST_AUTO_TEST_CASE(inputs_waiting_in_a_nodes_mailbox_count_as_received_and_an_aborted_steps_are_dropped) {
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, {});
  auto q = ops::Queue::fifo(root, {DType::float32}, {PartialShape{}}, {.shared_name = "gate"});
  auto next = q.dequeue(root.with_op_name("next"))[0];
  auto a = ops::neg(root.with_op_name("a"), x);
  auto b = ops::square(root.with_op_name("b"), x);
  // Two data inputs by message, and a control input that comes only once the queue has an element.
  auto sum = ops::add(root.with_op_name("sum").with_control_dependencies(std::vector<Output>{next}), a, b);
  auto put = q.enqueue(root.with_op_name("put"), {ops::constant(root, 1.0f)});
  Session s(root);
  auto held = std::async(std::launch::async, [&] {
    return s.run({{x, Tensor::scalar(3.0f)}}, {sum}, {}, {.timeout = std::chrono::seconds(20)});
  });
  // Asked until 'sum' has both data inputs (at most 10 s): never more, never a data input missing.
  std::optional<WaitingNode> seen;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       !seen && std::chrono::steady_clock::now() < until;) {
    for (auto& w : s.waiting_nodes())
      if (w.node == "sum" && w.received == 2) seen = w;
    if (!seen) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  BOOST_TEST_REQUIRE(seen.has_value(), "'sum' never showed its two data inputs received:\n" << s.describe_waiting());
  BOOST_TEST(seen->expected == 3);
  BOOST_TEST(seen->missing == std::vector<std::string>{"1 control input(s)"},
             fmt::format("{}", fmt::join(seen->missing, ", ")));
  s.run({}, {}, {put});
  BOOST_TEST(held.get()[0].scalar_value<float>() == 6.0f);  // -3 + 9

  // A step aborted while they wait: the report names 'sum', and the next step computes from its own.
  auto m = testing::error_of(
      [&] { s.run({{x, Tensor::scalar(2.0f)}}, {sum}, {}, {.timeout = std::chrono::milliseconds(200)}); },
      ErrorCode::deadline_exceeded);
  BOOST_TEST(contains(m, "node 'sum' has 2 of 3 inputs"), m);
  BOOST_TEST(settles(s), s.describe_waiting());
  s.run({}, {}, {put});
  BOOST_TEST(s.run({{x, Tensor::scalar(4.0f)}}, {sum})[0].scalar_value<float>() == 12.0f);  // -4 + 16
}

// A loop's NextIteration that keeps the gate of one frame lets the gate's signals of any other
// iteration than that frame's oldest unfinished one wait in its mailbox, unclaimed
// (NodeMailbox::kGate): they change nothing it sends. The oldest's signal, a value, another
// frame's or step's signal, and one signal too many to keep each claim it, the waiting ones
// handed over first, in the order they came.
BOOST_AUTO_TEST_CASE(a_gate_signal_of_a_later_iteration_waits_unclaimed_and_the_oldests_claims_next_iteration) {
  using Kind = NodeMailbox::Item::Kind;
  NodeMailbox box;
  std::vector<NodeMailbox::Item> items;
  std::vector<NodeMailbox::Call> calls;
  const Tag oldest{7, 42, 3};
  const NodeMailbox::Deferral gate{.left = NodeMailbox::kGate, .tag = &oldest};
  // Takes what is in (the claim held), then gives the claim up waiting as `waits` says; returns
  // the iterations taken.
  auto take_all = [&](std::optional<NodeMailbox::Deferral> waits = std::nullopt) {
    std::vector<int64_t> taken;
    while (box.take(items, calls, waits.value_or(gate))) {
      for (auto& item : items) taken.push_back(item.tag.iteration);
      items.clear();
    }
    return taken;
  };
  auto signal = [&](Tag tag) { return box.put(Kind::input, kControlSlot, tag, Value{}); };
  BOOST_TEST(signal(Tag{7, 42, 2}));  // a fresh mailbox is unclaimed and waits for nothing
  BOOST_TEST(take_all() == std::vector<int64_t>{2});

  BOOST_TEST(!signal(Tag{7, 42, 5}));
  BOOST_TEST(!signal(Tag{7, 42, 4}));
  BOOST_TEST(signal(oldest));
  BOOST_TEST((take_all() == std::vector<int64_t>{5, 4, 3}));

  BOOST_TEST(!signal(Tag{7, 42, 6}));
  BOOST_TEST(box.put(Kind::input, 0, Tag{7, 42, 8}, Value{Tensor::scalar(1), false}), "a value claims it");
  BOOST_TEST((take_all() == std::vector<int64_t>{6, 8}));

  BOOST_TEST(signal(Tag{7, 43, 6}), "another frame's signal claims it");
  BOOST_TEST(take_all().size() == 1u);
  BOOST_TEST(signal(Tag{8, 42, 6}), "another step's signal claims it");
  BOOST_TEST(take_all().size() == 1u);

  int waited = 0;
  while (!signal(Tag{7, 42, 10 + waited})) ++waited;
  BOOST_TEST(waited + 1 == int(NodeMailbox::kMaxDeferred), "no more than kMaxDeferred wait");
  BOOST_TEST(take_all().size() == NodeMailbox::kMaxDeferred);

  // Given up without the gate's deferral (the node keeps no frame's gate, or several), the claim
  // goes to every signal.
  BOOST_TEST(signal(oldest));
  BOOST_TEST(take_all(NodeMailbox::Deferral{}).size() == 1u);
  BOOST_TEST(signal(Tag{7, 42, 40}));
}

BOOST_AUTO_TEST_CASE(a_cheap_kernel_is_timed_one_firing_in_eight_and_one_turned_expensive_at_each) {
  FiringTimer timer;
  // The first two firings are timed whatever the kernel's cost so far.
  BOOST_TEST(timer.next(true));
  BOOST_TEST(timer.next(true));
  // Then a cheap kernel: one in kEvery, the others not.
  std::vector<int> timed;
  for (int i = 0; i < 4 * FiringTimer::kEvery; ++i)
    if (timer.next(true)) timed.push_back(i);
  BOOST_TEST(timed == (std::vector<int>{0, 8, 16, 24}), boost::test_tools::per_element());
  // A firing measured expensive: every firing from then on is timed.
  for (int i = 0; i < 2 * FiringTimer::kEvery; ++i) BOOST_TEST(timer.next(false));
  // Cheap again: the next is timed (it could be the one that says so), then one in kEvery.
  BOOST_TEST(timer.next(true));
  int again = 0;
  for (int i = 0; i < 2 * FiringTimer::kEvery; ++i) again += timer.next(true);
  BOOST_TEST(again == 2);
}

BOOST_AUTO_TEST_CASE(steps_in_flight_never_exceed_the_bound) {
  auto root = Scope::root();
  auto a = ops::random_normal(root, {192, 192});
  Output m = a;
  for (int i = 0; i < 6; ++i) m = ops::matmul(root, m, a);
  auto y = ops::sum(root, m);
  Session s(root, {.max_steps_in_flight = 2});
  std::atomic<bool> done{false};
  std::atomic<int> most{0};
  std::thread watcher([&] {
    while (!done) {
      most = std::max(most.load(), s.steps_in_flight());
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 5; ++i) s.run({y});
    });
  for (auto& th : threads) th.join();
  done = true;
  watcher.join();
  BOOST_TEST(most.load() <= 2);
  BOOST_TEST(most.load() >= 1);
}

BOOST_AUTO_TEST_CASE(a_node_with_several_outputs_consumers_gets_each_value_once) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, {2});
  auto twice = ops::add(root, x, x);
  auto y = ops::mul(root, twice, twice);
  Session s(root);
  auto out = s.run({{x, Tensor::from_vector<float>({1, 2})}}, {y, twice, twice});
  BOOST_TEST(out[0].to_vector<float>() == std::vector<float>({4, 16}), boost::test_tools::per_element());
  BOOST_TEST(out[1].to_vector<float>() == out[2].to_vector<float>(), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_graph_without_requests_runs_on_one_device_unless_spread) {
  // Unspread, nodes follow their inputs to the default device and the executable has one
  // partition. Spread (the *_spread ctest entries), the placer hands the nodes the CPU devices
  // in turn and each device runs a partition of its own: the same tests then cover the
  // _Send/_Recv paths.
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, {2});
  auto y = ops::add(root, ops::mul(root, x, x), ops::neg(root, x));  // four nodes free to move
  int cpus = 0;
  for (auto& d : DeviceRegistry::instance().devices()) cpus += d->type() == DeviceType::cpu;
  auto runtime = Runtime::get(0);
  auto shard = runtime->system().spawn(param_shard);
  {
    Executable exe(runtime->system(), root.graph(), {x.endpoint()}, {y.endpoint()}, {},
                   [&](const std::string&) { return shard; }, {.runtime = runtime.get()});
    BOOST_TEST(int(exe.parts().size()) == (spread() ? std::min(cpus, 4) : 1), cpus << " CPU devices");
  }
  caf::anon_send_exit(shard, caf::exit_reason::user_shutdown);
  Session s(root);
  auto out = s.run({{x, Tensor::from_vector<float>({2, 3})}}, {y});
  BOOST_TEST(out[0].to_vector<float>() == std::vector<float>({2, 6}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_executable_is_gone_only_once_every_node_actor_has_exited_one_that_exited_before_included) {
  // The teardown counts each node's actor out as its exit's cleanup ends (no monitor, no message
  // back per node): one that exited before it began must not be waited for, and every other
  // has exited (its monitors told) by the time the destructor returns.
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, {2});
  auto y = ops::add(root, ops::mul(root, x, x), ops::neg(root, x));
  auto runtime = Runtime::get(0);
  auto exe = std::make_unique<Executable>(runtime->system(), root.graph(), std::vector<Endpoint>{x.endpoint()},
                                          std::vector<Endpoint>{y.endpoint()}, std::vector<int>{},
                                          [](const std::string&) { return ShardActor{}; },
                                          ExecutableOptions{.runtime = runtime.get()});
  std::vector<caf::actor> actors;
  for (const auto& part : exe->parts())
    for (const auto& a : part->actors)
      if (a) actors.push_back(a);
  BOOST_TEST_REQUIRE(actors.size() >= 3u);
  caf::scoped_actor self{runtime->system()};
  // The first exits now, as an actor whose handler threw would.
  self->monitor(actors.front());
  caf::anon_send_exit(actors.front(), caf::exit_reason::kill);
  bool first_down = false;
  self->receive([&](caf::down_msg&) { first_down = true; }, caf::after(std::chrono::seconds(30)) >> [] {});
  BOOST_TEST_REQUIRE(first_down);
  for (std::size_t i = 1; i < actors.size(); ++i) self->monitor(actors[i]);
  auto torn_down = std::async(std::launch::async, [&] { exe.reset(); });
  BOOST_TEST_REQUIRE((torn_down.wait_for(std::chrono::seconds(60)) == std::future_status::ready),
                     "the executable's destructor still waits after 60 s");
  std::size_t down = 0;
  for (std::size_t i = 1; i < actors.size(); ++i)
    self->receive([&](caf::down_msg&) { ++down; }, caf::after(std::chrono::milliseconds(0)) >> [] {});
  BOOST_TEST(down == actors.size() - 1);
}

BOOST_AUTO_TEST_CASE(a_kernel_on_tiny_known_shapes_is_cheap_from_its_first_firing_and_any_other_starts_expensive) {
  // The plan says which kernel nodes start cheap, before any has fired (NodePlan::tiny): those
  // of an op without state whose inputs and outputs are all known and tiny. A sum of a large
  // matrix has a scalar out but not in; an unknown shape may be any size; a random draw keeps
  // state and may do any work.
  auto root = Scope::root();
  auto s = ops::placeholder(root.with_op_name("s"), DType::float32, Shape{});
  auto big = ops::placeholder(root.with_op_name("big"), DType::float32, Shape{128, 128});
  auto unknown = ops::placeholder(root.with_op_name("unknown"), DType::float32, PartialShape{-1});
  std::vector<Output> outs = {ops::add(root.with_op_name("scalar_add"), s, s),
                              ops::less(root.with_op_name("scalar_less"), s, s),
                              ops::add(root.with_op_name("big_add"), big, big),
                              ops::sum(root.with_op_name("big_sum"), big),
                              ops::neg(root.with_op_name("unknown_neg"), unknown),
                              ops::random_uniform(root.with_op_name("draw"), Shape{})};
  std::vector<Endpoint> fetches;
  for (auto& o : outs) fetches.push_back(o.endpoint());
  auto runtime = Runtime::get(0);
  Executable exe(runtime->system(), root.graph(), {s.endpoint(), big.endpoint(), unknown.endpoint()}, fetches, {},
                 [](const std::string&) { return ShardActor{}; }, {.runtime = runtime.get()});
  std::map<std::string, bool> tiny;
  for (const auto& part : exe.parts())
    for (const NodePlan& np : part->nodes)
      if (np.active && np.kind == NodeKind::kernel) tiny[np.node->name] = np.tiny;
  BOOST_TEST_REQUIRE(tiny.size() >= outs.size());
  BOOST_TEST(tiny.at("scalar_add"));
  BOOST_TEST(tiny.at("scalar_less"));
  BOOST_TEST(!tiny.at("big_add"));
  BOOST_TEST(!tiny.at("big_sum"));
  BOOST_TEST(!tiny.at("unknown_neg"));
  BOOST_TEST(!tiny.at("draw"));
  Session session(root);
  auto r = session.run({{s, Tensor::scalar(2.0f)}, {big, Tensor::zeros(DType::float32, Shape{128, 128})},
                        {unknown, Tensor::from_vector<float>({1, 2})}},
                       {outs[0], outs[4]});
  BOOST_TEST(r[0].scalar_value<float>() == 4.0f);
  BOOST_TEST(r[1].to_vector<float>() == std::vector<float>({-1, -2}), boost::test_tools::per_element());
}

namespace {
// Builds and runs a chain of n adds, then waits for the huge-page thread to be done with it.
void run_chain_of(int n) {
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, {});
  auto one = ops::constant(root, 1.0f);
  Output y = x;
  for (int i = 0; i < n; ++i) y = ops::add(root, y, one);
  Session s(root);
  BOOST_TEST(s.run({{x, Tensor::scalar(0.0f)}}, {y})[0].scalar_value<float>() == float(n));
  BOOST_TEST_REQUIRE(huge_pages::settle(std::chrono::seconds(60)));
}
std::size_t handled() { return huge_pages::counts().collapsed + huge_pages::counts().refused; }
}  // namespace

BOOST_AUTO_TEST_CASE(a_large_graphs_node_state_goes_into_huge_pages_and_small_ones_are_left_alone,
                     *troupe::testing::runs_here([] {
                       return huge_pages::enabled()
                                  ? std::string()
                                  : "huge pages are off (TROUPE_HUGE_PAGES=0 or a kernel without MADV_COLLAPSE)";
                     })) {
  const std::size_t before = handled();
  run_chain_of(100);
  BOOST_TEST(handled() == before);
  run_chain_of(4000);
  // 4,000 nodes' actors alone take several MiB: more than one range was handled.
  BOOST_TEST(handled() >= before + 2);
}

BOOST_AUTO_TEST_CASE(a_graph_whose_actors_are_spawned_by_several_threads_computes_every_value_as_one_thread_would) {
  // 6,000 nodes: enough for Executable::build to spawn their actors in slices on several
  // threads where the process may use several cores. Node i averages node i-1 and node i/2, so
  // every slice's actors read from others'; values from each slice are checked against the
  // same arithmetic done here.
  constexpr int n = 6000;
  if (usable_cores() < 2) BOOST_TEST_MESSAGE("one usable core: the actors are spawned by one thread");
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, {});
  auto half = ops::constant(root, 0.5f);
  std::vector<Output> node{x};
  for (int i = 1; i <= n; ++i)
    node.push_back(ops::add(root, ops::mul(root, node[i - 1], half), ops::mul(root, node[i / 2], half)));
  const std::vector<int> checked = {1, 1500, 2999, 3000, 4500, n};
  std::vector<TensorName> fetches;
  for (int i : checked) fetches.push_back(node[i]);
  Session s(root);
  for (float x0 : {1.0f, -3.0f}) {
    std::vector<float> expected{x0};
    for (int i = 1; i <= n; ++i) expected.push_back(expected[i - 1] * 0.5f + expected[i / 2] * 0.5f);
    auto out = s.run({{x, Tensor::scalar(x0)}}, fetches);
    for (std::size_t k = 0; k < checked.size(); ++k)
      BOOST_TEST(out[k].scalar_value<float>() == expected[checked[k]], "node " << checked[k] << ", x = " << x0);
  }
}
