// Following waits to the stuck node (actors/trace/wait_chain.hpp), on reports as tasks give them, and a
// local session's own report of a step that runs long (SessionOptions::slow_step_report).
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>
#include <mutex>
#include <thread>

#include "actors/session.hpp"
#include "actors/trace/wait_chain.hpp"
#include "ops/all.hpp"
#include "ops/data/queue.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using namespace std::chrono_literals;

namespace {

// A node of the task's own partition that waits for the value of `input` (produced by node `from`).
WaitReport waits_on(const std::string& node, const std::string& from) {
  return WaitReport{node, Tag{1, 0, 0}, 0, 1, {from + ":0"}, {{"", from, from + ":0"}}};
}
// A _Recv waiting for `tensor` from the CPU of `task` ("ps:0").
WaitReport receives(const std::string& node, const std::string& task, const std::string& tensor) {
  const std::string job = task.substr(0, task.find(':')), index = task.substr(task.find(':') + 1);
  const std::string device = "/job:" + job + "/task:" + index + "/device:CPU:0";
  return WaitReport{node, Tag{1, 0, 0}, 0, 1, {"the value of '" + tensor + "' from " + device},
                    {{device, tensor.substr(0, tensor.find(':')), tensor}}};
}
WaitReport waits_for_queue(const std::string& node) {
  return WaitReport{node, Tag{1, 0, 0}, 0, 1, {"queue 'q' to answer"}, {}};
}

// The sentences of a report, before its per-node lines.
std::string stuck_part(const std::string& report) {
  const auto from = report.find("stuck: ");
  if (from == std::string::npos) return {};
  return report.substr(from, report.find("; nodes still waiting") - from);
}

}  // namespace

BOOST_AUTO_TEST_CASE(waits_are_followed_across_three_tasks_to_the_node_that_is_stuck) {
  std::vector<TaskWaits> tasks{
      {"worker:1", {waits_on("train", "w/_recv"), receives("w/_recv", "ps:0", "w:0")}},
      {"ps:0", {waits_on("w", "g/_recv"), receives("g/_recv", "worker:0", "g:0")}},
      {"worker:0", {waits_for_queue("g"), waits_on("g/_send", "g")}},
  };
  auto stuck = follow_waits(tasks);
  BOOST_TEST_REQUIRE(stuck.size() == 1u);
  BOOST_TEST(stuck[0] == "worker:1 'train' waits on 'w/_recv', which waits for 'w:0' from ps:0, where 'w' waits on "
                         "'g/_recv', which waits for 'g:0' from worker:0, where 'g' has 0 of 1 inputs, waits for "
                         "queue 'q' to answer");
}

BOOST_AUTO_TEST_CASE(two_stuck_nodes_make_two_sentences_and_a_circle_of_waits_ends) {
  std::vector<TaskWaits> tasks{
      {"", {waits_on("a", "b"), waits_for_queue("b"), waits_on("c", "d"), waits_on("d", "c"), waits_for_queue("e")}}};
  auto stuck = follow_waits(tasks);
  BOOST_TEST_REQUIRE(stuck.size() == 3u);
  BOOST_TEST(stuck[0] == "'a' waits on 'b', which has 0 of 1 inputs, waits for queue 'q' to answer");
  BOOST_TEST(stuck[1] == "'e' has 0 of 1 inputs, waits for queue 'q' to answer");
  BOOST_TEST(stuck[2] == "'c' waits on 'd', which has 0 of 1 inputs, waits for c:0");  // circles come last
}

BOOST_AUTO_TEST_CASE(a_value_whose_sender_waits_for_nothing_or_did_not_answer_is_said_so) {
  std::vector<TaskWaits> tasks{{"worker:0", {receives("x/_recv", "ps:0", "x:0"), receives("y/_recv", "ps:1", "y:0"),
                                             receives("z/_recv", "ps:2", "z:0")}},
                               {"ps:0", {}},
                               {"ps:1", {}, false}};
  auto stuck = follow_waits(tasks);
  BOOST_TEST_REQUIRE(stuck.size() == 3u);
  BOOST_TEST(stuck[0] == "worker:0 'x/_recv' waits for 'x:0' from ps:0, where 'x' waits for no input (its kernel "
                         "runs, or its value is on the way)");
  BOOST_TEST(stuck[1] == "worker:0 'y/_recv' waits for 'y:0' from ps:1, which did not say what it waits for");
  BOOST_TEST(stuck[2] == "worker:0 'z/_recv' waits for 'z:0' from ps:2, which is not running this step or did not "
                         "say what it waits for");
}

BOOST_AUTO_TEST_CASE(a_local_step_that_runs_long_is_reported_by_the_session_and_goes_on) {
  auto root = Scope::root();
  auto q = ops::Queue::fifo(root, {DType::float32}, {PartialShape{}}, {.shared_name = "slow"});
  auto next = q.dequeue(root.with_op_name("next"))[0];
  auto doubled = ops::mul(root.with_op_name("doubled"), next, ops::constant(root, 2.0f));
  auto put = q.enqueue(root.with_op_name("put"), {ops::constant(root, 21.0f)});
  std::mutex mutex;
  std::vector<std::string> reports;
  SessionOptions options;
  options.slow_step_report = 100ms;
  options.on_slow_step = [&](const std::string& r) {
    std::lock_guard<std::mutex> lock(mutex);
    reports.push_back(r);
  };
  Session s(root, options);
  auto held = std::async(std::launch::async, [&] { return s.run({}, {doubled}, {}, {.timeout = 20s}); });
  // Reported after 100 ms, 200 ms, 400 ms, ...: wait for two (at most 10 s), then let it finish.
  for (auto until = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(20ms);
    std::lock_guard<std::mutex> lock(mutex);
    if (reports.size() >= 2) break;
  }
  const std::string asked = s.describe_waiting();
  s.run({}, {}, {put});
  BOOST_TEST(held.get()[0].scalar_value<float>() == 42.0f);
  std::lock_guard<std::mutex> lock(mutex);
  BOOST_TEST_REQUIRE(reports.size() >= 2u);
  BOOST_TEST(contains(reports[0], "step 1 has run for "), reports[0]);
  // (Spread over several devices, the dequeue's value goes through a _Recv: "'next/_recv...'
  // waits on 'next', which has 0 of 1 inputs, ...".)
  BOOST_TEST(contains(reports[0], "and goes on; stuck: '"), reports[0]);
  BOOST_TEST((contains(stuck_part(reports[0]), "'next' has 0 of 1 inputs, waits for queue 'slow' to answer") ||
              contains(stuck_part(reports[0]), "'next', which has 0 of 1 inputs, waits for queue 'slow' to answer")),
             reports[0]);
  BOOST_TEST(contains(reports[0], "nodes still waiting:\n  node '"), reports[0]);
  BOOST_TEST(contains(stuck_part(asked), "waits for queue 'slow' to answer"), asked);
}

BOOST_AUTO_TEST_CASE(a_local_step_past_its_deadline_names_the_stuck_node_first) {
  auto root = Scope::root();
  auto q = ops::Queue::fifo(root, {DType::float32}, {PartialShape{}}, {.shared_name = "never"});
  auto next = q.dequeue(root.with_op_name("next"))[0];
  auto doubled = ops::mul(root.with_op_name("doubled"), next, ops::constant(root, 2.0f));
  Session s(root);
  auto m = troupe::testing::error_of([&] { s.run({}, {doubled}, {}, {.timeout = 300ms}); }, ErrorCode::deadline_exceeded);
  BOOST_TEST(contains(m, "was aborted; stuck: '"), m);
  BOOST_TEST((contains(stuck_part(m), "'next' has 0 of 1 inputs, waits for queue 'never' to answer") ||
              contains(stuck_part(m), "'next', which has 0 of 1 inputs, waits for queue 'never' to answer")),
             m);
}
