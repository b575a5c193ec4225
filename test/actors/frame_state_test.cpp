// A partition's own frame state: an Exit whose frame no Enter of this partition entered fails
// the step naming the loop (it never drops the value silently, which would hang the step); a
// failed step's frames are dropped and remembered as ended; a spread loop's iterations are
// placed on the worker with fewer unfinished ones.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "actors/executor/executable.hpp"
#include "actors/executor/spawn_node.hpp"
#include "actors/runtime.hpp"
#include "actors/session.hpp"
#include "devices/device.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;

BOOST_AUTO_TEST_CASE(a_frame_table_forgets_a_dropped_step_and_remembers_that_it_ended) {
  FrameTable frames;
  Tag child = frames.enter(Tag{5, 0, 0}, "loop", 42, 1, 1);
  BOOST_TEST(frames.parent(child).has_value());
  BOOST_TEST(!frames.dropped(5));
  frames.drop_step(5);
  BOOST_TEST(!frames.parent(child).has_value());
  BOOST_TEST(frames.dropped(5));
  BOOST_TEST(!frames.dropped(6));
  BOOST_TEST(frames.size() == 0u);
}

BOOST_AUTO_TEST_CASE(a_spread_loops_iteration_goes_to_the_worker_with_fewer_unfinished_and_stays_there) {
  FrameTable frames;
  constexpr int kWindow = 4, kWorkers = 2;
  Tag frame = frames.enter(Tag{7, 0, 0}, "loop", 42, 1, 1);
  auto at = [&](int64_t k) { return Tag{frame.step, frame.frame, k}; };
  auto place = [&](int64_t k) { return frames.iteration_worker(at(k), kWindow, kWorkers); };
  // Even: iteration k on worker k mod 2, and asked again, the same.
  BOOST_TEST(place(0) == 0);
  BOOST_TEST(place(1) == 1);
  BOOST_TEST(place(0) == 0);
  BOOST_TEST(place(1) == 1);
  // Worker 1 finishes its iteration, worker 0 does not: the next two go to worker 1 (the
  // second a tie, 1 against 1 unfinished, broken by number: 3 mod 2).
  frames.iteration_finished(at(1));
  frames.iteration_finished(at(1));  // heard twice (two NextIterations): counted once
  BOOST_TEST(place(2) == 1);
  BOOST_TEST(place(3) == 1);
  BOOST_TEST(place(2) == 1, "an iteration stays where it was placed");
  // Iteration 4 takes iteration 0's place in the window: 0 has finished by then (4 could not
  // have started otherwise), so worker 0 counts none, worker 1 two.
  BOOST_TEST(place(4) == 0);
  BOOST_TEST(place(5) == 0, "1 unfinished on worker 0 against 2");
  BOOST_TEST(place(6) == 1, "iteration 2 of worker 1 has finished: 1 against 2");
  BOOST_TEST(place(2) == 0, "asked after a later iteration took its place: by number");
  // Another step's frame, one worker, or a frame no longer known: by number.
  BOOST_TEST(frames.iteration_worker(Tag{8, frame.frame, 3}, kWindow, kWorkers) == 1);
  BOOST_TEST(frames.iteration_worker(at(7), kWindow, /*workers=*/1) == 0);
  frames.drop_step(7);
  BOOST_TEST(place(6) == 0);
  // A loop that lets a billion iterations run at once: no room is kept for them, every
  // iteration by number (iteration 3 would go to worker 0 otherwise, 1 unfinished on worker 1).
  Tag wide = frames.enter(Tag{9, 0, 0}, "wide", 43, 1, 1);
  auto wide_place = [&](int64_t k) {
    return frames.iteration_worker(Tag{wide.step, wide.frame, k}, 1 << 30, kWorkers);
  };
  BOOST_TEST(wide_place(0) == 0);
  BOOST_TEST(wide_place(1) == 1);
  frames.iteration_finished(Tag{wide.step, wide.frame, 0});
  BOOST_TEST(wide_place(3) == 1);
}

BOOST_AUTO_TEST_CASE(an_exit_whose_frame_this_partition_never_entered_fails_the_step_naming_the_loop) {
  // A partition holding only an Exit of loop 'outer/while': its value and last LoopCond arrive,
  // but no Enter of the loop ran here.
  auto root = Scope::root();
  auto value = ops::placeholder(root.with_op_name("value"), DType::float32, Shape{});
  auto pred = ops::placeholder(root.with_op_name("pred"), DType::boolean, Shape{});
  value.node()->attrs[kLoopFrameAttr] = std::string("outer/while");
  pred.node()->attrs[kLoopFrameAttr] = std::string("outer/while");
  auto out = ops::exit(root.with_op_name("exit"), value, pred);

  auto runtime = Runtime::get(0);
  caf::scoped_actor self{runtime->system()};
  auto plan = std::make_shared<ExecPlan>();
  plan->graph = root.graph_ptr();
  plan->nodes.resize(std::size_t(root.graph().size()));
  const int id = out.node()->id;
  NodePlan& np = plan->nodes[id];
  np.node = out.node();
  np.device = &DeviceRegistry::instance().cpu();
  np.kind = kind_of(root.graph(), *out.node());
  np.num_inputs = 2;
  np.fixed_inputs.resize(2);
  np.graph = &root.graph();
  plan->device = np.device->name();
  np.device_name = &plan->device;
  np.outputs.resize(2);
  plan->step_actor = caf::actor_cast<caf::actor>(self);
  BOOST_TEST_REQUIRE((np.kind == NodeKind::exit));
  plan->loops[id];  // a loop kind's node has its LoopPlan (an ungated Exit: all defaults)
  plan->actors.resize(plan->nodes.size());
  plan->actors[id] = spawn_node(runtime->system(), plan, id, nullptr).actor;

  const Tag last{7, 0x1234, 3};
  send_input(nullptr, plan->actors[id], last, 1, Value{Tensor::scalar(false), false});
  send_input(nullptr, plan->actors[id], last, 0, Value{Tensor::scalar(2.5f), false});
  std::string message;
  self->receive(
      [&](abort_atom, const Tag& tag, int32_t code, std::string& m, std::string& device) {
        BOOST_TEST(tag.step == 7u);
        BOOST_TEST(code == int32_t(ErrorCode::internal));
        BOOST_TEST(device == "/job:localhost/task:0/device:CPU:0");
        message = m;
      },
      caf::after(std::chrono::seconds(30)) >> [&] { message = "no abort within 30 s: the value was dropped"; });
  BOOST_TEST(contains(message, "Exit 'exit' on /job:localhost/task:0/device:CPU:0"), message);
  BOOST_TEST(contains(message, "while loop 'outer/while'"), message);
  BOOST_TEST(contains(message, "was never entered on this device"), message);

  self->send_exit(plan->actors[id], caf::exit_reason::user_shutdown);
  self->wait_for(plan->actors[id]);
  plan->actors.clear();
  plan->step_actor = nullptr;
}

BOOST_AUTO_TEST_CASE(a_gated_exit_hears_once_that_its_loop_is_over_and_not_its_condition_going_on) {
  // Two loop variables and work the iteration gate waits for: each Exit is told once, by both
  // NextIterations, that every iteration has finished (LoopPlan::loop_end), not by the gate
  // every iteration; the LoopCond's live true, which says only that the loop goes on, is not
  // sent to the Exits nor to the Merge that serves the loop invariant (Target::drop_true), its
  // false or dead is; a dead value is not sent to an Exit's data input (Target::drop_dead).
  auto root = Scope::root();
  auto n = ops::placeholder(root.with_op_name("n"), DType::int32, Shape{});
  auto out = ops::while_loop(
      root, [&](const Scope& s, const std::vector<Output>& v) { return ops::less(s, v[0], n); },
      [](const Scope& s, const std::vector<Output>& v) {
        ops::square(s.with_op_name("work"), ops::cast(s, v[0], DType::float32));
        return std::vector<Output>{ops::add(s, v[0], ops::constant(s, int32_t(1))), ops::add(s, v[1], v[0])};
      },
      {ops::constant(root, int32_t(0)), ops::constant(root, int32_t(0))}, {.parallel_iterations = 4, .name = "loop"});
  auto runtime = Runtime::get(0);
  std::weak_ptr<const ExecPlan> kept;  // the NextIterations' Targets hold the Exits' actors
  {
    Executable exe(runtime->system(), root.graph(), {n.endpoint()}, {out[0].endpoint(), out[1].endpoint()}, {},
                   [](const std::string&) { return ShardActor{}; }, {.runtime = runtime.get()});
    kept = exe.parts()[0];
    if (exe.parts().size() > 1) {
      // TROUPE_CPU_DEVICES spreads the graph over partitions: the control loops' Exits keep the
      // gate's signal per iteration; what follows checks one partition's plan.
      BOOST_TEST_MESSAGE("the loop spans devices: its plan is not checked");
    } else {
      const ExecPlan& part = *exe.parts()[0];
      std::vector<int> exits, nexts;
      int gate = -1, invariant = -1;
      for (int id = 0; id < int(part.nodes.size()); ++id) {
        const NodePlan& np = part.nodes[std::size_t(id)];
        if (np.kind == NodeKind::exit) exits.push_back(id);
        if (np.kind == NodeKind::loop_invariant) invariant = id;  // n, for the condition
        if (np.kind == NodeKind::next_iteration) nexts.push_back(id);
        if (np.node->name == "loop/body/work") gate = id;  // the body's one sink is the gate itself
      }
      BOOST_TEST_REQUIRE(exits.size() == 2u);
      BOOST_TEST_REQUIRE(nexts.size() == 2u);
      BOOST_TEST_REQUIRE(gate >= 0);
      BOOST_TEST_REQUIRE(invariant >= 0);
      auto reaches = [&](const std::vector<Target>& targets, int id) {
        return std::count_if(targets.begin(), targets.end(),
                             [&](const Target& t) { return t.actor == part.actors[std::size_t(id)]; });
      };
      for (int x : exits) {
        BOOST_TEST(part.loops.at(x).loop_end_signals == 2);
        BOOST_TEST(reaches(part.nodes[std::size_t(gate)].control_outputs, x) == 0, "the gate tells Exit " << x);
        for (int next : nexts) BOOST_TEST(reaches(part.loops.at(next).loop_end, x) == 1);
      }
      // Every target of an Exit: its data input drops dead values, its pred live trues.
      int preds = 0, values = 0;
      for (const NodePlan& np : part.nodes)
        for (const auto& port : np.outputs)
          for (const Target& t : port)
            for (int x : exits)
              if (t.actor == part.actors[std::size_t(x)]) {
                preds += t.slot == 1;
                values += t.slot == 0;
                if (t.slot == 1) BOOST_TEST((t.drop_true && !t.drop_dead));
                if (t.slot == 0) BOOST_TEST((t.drop_dead && !t.drop_true));
              }
      BOOST_TEST(preds == 2);
      BOOST_TEST(values == 2);
      // The loop invariant (n, for the condition) is served by the loop's first Merge, which
      // starts each iteration (LoopPlan::hosted): n's value goes to that Merge, which hears
      // the LoopCond once, only false or dead too (it marks the frame's last iteration; a live
      // true would be a message and a turn every iteration), and nothing goes to the invariant's
      // own actor, not even the Merge's control each iteration.
      int host = -1;  // the Merge serving it, and its index among those served there
      uint32_t hosted_slot = 0;
      for (const auto& [id, loop] : part.loops)
        if (loop.hosted)
          for (std::size_t j = 0; j < loop.hosted->size(); ++j)
            if ((*loop.hosted)[j] == invariant) host = id, hosted_slot = uint32_t(j);
      BOOST_TEST_REQUIRE(host >= 0);
      const NodePlan& merge = part.nodes[std::size_t(host)];
      BOOST_TEST((merge.kind == NodeKind::loop_merge));
      BOOST_TEST_REQUIRE(part.loops.at(host).hosted);
      BOOST_TEST((*part.loops.at(host).hosted == std::vector<int>{invariant}));
      BOOST_TEST(part.loops.at(host).loop_end_inputs == 1);
      int to_invariant = 0, ends = 0, values_served = 0;
      for (const NodePlan& np : part.nodes) {
        to_invariant += reaches(np.control_outputs, invariant);
        for (const auto& port : np.outputs)
          for (const Target& t : port) {
            to_invariant += t.actor == part.actors[std::size_t(invariant)];
            if (t.actor != part.actors[std::size_t(host)]) continue;
            if (t.slot == LoopPlan::kLoopEndSlot) {
              ++ends;
              BOOST_TEST((t.drop_true && !t.drop_dead));
            }
            values_served += t.slot == LoopPlan::kInvariantSlot + hosted_slot;
          }
      }
      BOOST_TEST(to_invariant == 0);
      BOOST_TEST(ends == 1);
      BOOST_TEST(values_served == 1);
    }
  }
  // The executable gone, its plan goes with its actors (no cycle of plan, Target and actor).
  for (int i = 0; i < 1000 && !kept.expired(); ++i) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  BOOST_TEST(kept.expired(), "the plan outlived its executable");
  // And the loop still ends as it should, over several steps, and at once when its condition
  // is false at the start.
  Session s(root);
  for (int32_t k : {5, 0, 7}) {
    auto r = s.run({{n, Tensor::scalar(k)}}, {out[0], out[1]});
    BOOST_TEST(r[0].scalar_value<int32_t>() == k);
    BOOST_TEST(r[1].scalar_value<int32_t>() == k * (k - 1) / 2);
  }
}
