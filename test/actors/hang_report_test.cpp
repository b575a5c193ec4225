// A step stuck in another process explains itself: troupe-node processes on 127.0.0.1 (ps:0 and
// worker:0); a dequeue on ps:0 from an empty queue holds a step whose product runs on worker:0.
// At the step's deadline the error names, per task still running, the nodes that wait and what
// for: worker:0's _Recv waits for the dequeued value from ps:0, ps:0's dequeue for its queue. Every
// process is stopped by its pid, also when a check fails. `troupe-node --status` shows the same of
// a step still in flight.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <future>
#include <mutex>
#include <thread>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "ops/data/queue.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/node_cluster.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

// What `command` prints, and whether it exited 0.
std::pair<std::string, bool> output_of(const std::string& command) {
  std::string text;
  FILE* out = ::popen(command.c_str(), "r");
  if (!out) return {text, false};
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, out)) > 0;) text.append(buffer, n);
  return {text, ::pclose(out) == 0};
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_step_stuck_on_a_queue_in_another_process_names_the_waits_of_every_task) {
  // worker:0 doubles what ps:1 adds one to, which ps:0 dequeues from a queue nobody fills.
  troupe::testing::NodeCluster cluster({{"ps", 2}, {"worker", 1}});
  auto root = Scope::root();
  auto on_ps = root.with_device("/job:ps/task:0");
  auto q = ops::Queue::fifo(on_ps, {DType::float32}, {PartialShape{}}, {.shared_name = "stuck"});
  auto next = q.dequeue(on_ps.with_op_name("next"))[0];
  auto plus = ops::add(root.with_device("/job:ps/task:1").with_op_name("plus"), next, ops::constant(root, 1.0f));
  auto doubled = ops::mul(root.with_device("/job:worker/task:0").with_op_name("doubled"), plus,
                          ops::constant(root, 2.0f));
  Session session(root, cluster.session_on("worker:0"));
  auto m = error_of([&] { session.run({}, {doubled}, {}, {.timeout = 1500ms}); }, ErrorCode::deadline_exceeded);
  BOOST_TEST(contains(m, "did not finish within its deadline"), m);
  BOOST_TEST(contains(m, "nodes still waiting"), m);
  BOOST_TEST(contains(m, "task ps:0"), m);
  BOOST_TEST(contains(m, "'next' has 0 of 1 inputs, waits for queue 'stuck' to answer"), m);
  BOOST_TEST(contains(m, "task worker:0"), m);
  BOOST_TEST(contains(m, "waits for the value of 'next:0' from /job:ps/task:0/device:CPU:0"), m);
  // The waits followed from worker:0 through ps:1 (whose 'plus' has had no input yet) to ps:0.
  BOOST_TEST(contains(m, "stuck: worker:0 "), m);
  BOOST_TEST(contains(m, "waits for 'plus:0' from ps:1, where 'plus' waits on "), m);
  BOOST_TEST(contains(m, "which waits for 'next:0' from ps:0, where 'next' has 0 of 1 inputs, waits for queue 'stuck'"), m);
  BOOST_TEST_MESSAGE(m);
}

BOOST_AUTO_TEST_CASE(troupe_node_status_shows_a_step_in_flight_and_what_each_task_waits_for) {
  troupe::testing::NodeCluster cluster({{"ps", 1}, {"worker", 1}});
  auto root = Scope::root();
  auto on_ps = root.with_device("/job:ps/task:0");
  auto q = ops::Queue::fifo(on_ps, {DType::float32}, {PartialShape{}}, {.shared_name = "held"});
  auto next = q.dequeue(on_ps.with_op_name("next"))[0];
  auto doubled = ops::mul(root.with_device("/job:worker/task:0").with_op_name("doubled"), next,
                          ops::constant(root, 2.0f));
  auto put = q.enqueue(on_ps.with_op_name("put"), {ops::constant(on_ps, 21.0f)});
  // The session reports the step itself once it has run for 300 ms.
  std::mutex mutex;
  std::vector<std::string> slow_reports;
  SessionOptions options = cluster.session_on("worker:0");
  options.slow_step_report = 300ms;
  options.on_slow_step = [&](const std::string& report) {
    std::lock_guard<std::mutex> lock(mutex);
    slow_reports.push_back(report);
  };
  Session session(root, options);
  auto held = std::async(std::launch::async, [&] { return session.run({}, {doubled}, {}, {.timeout = 30s}); });
  // troupe-node --status, asked of either task, reports both (polled until the step has reached
  // the dequeue: within 10 s).
  const std::string command = fmt::format("timeout 20 {} --status 127.0.0.1:{}", TROUPE_NODE_BINARY, cluster.port("ps:0"));
  std::string report;
  for (auto until = std::chrono::steady_clock::now() + 10s; std::chrono::steady_clock::now() < until;) {
    report = output_of(command).first;
    if (contains(report, "waits for queue 'held'") && contains(report, "waits for the value of 'next:0'")) break;
    std::this_thread::sleep_for(100ms);
  }
  BOOST_TEST(contains(report, fmt::format("ps:0 at 127.0.0.1:{}:", cluster.port("ps:0"))), report);
  BOOST_TEST(contains(report, fmt::format("worker:0 at 127.0.0.1:{}:", cluster.port("worker:0"))), report);
  BOOST_TEST(contains(report, "step 1 of graph"), report);
  BOOST_TEST(contains(report, "'next' has 0 of 1 inputs, waits for queue 'held' to answer"), report);
  BOOST_TEST(contains(report, "waits for the value of 'next:0' from /job:ps/task:0/device:CPU:0"), report);
  const std::string stuck = "waits for 'next:0' from ps:0, where 'next' has 0 of 1 inputs, waits for queue 'held'";
  BOOST_TEST(contains(report, "stuck: step 1 of graph"), report);
  BOOST_TEST(contains(report, stuck), report);
  BOOST_TEST_MESSAGE(report);
  // The session says the same when asked, and said it by itself (polled: within 10 s).
  const std::string asked = session.describe_waiting();
  BOOST_TEST(contains(asked, "step 1: stuck: worker:0 "), asked);
  BOOST_TEST(contains(asked, stuck), asked);
  std::string told;
  for (auto until = std::chrono::steady_clock::now() + 10s; told.empty() && std::chrono::steady_clock::now() < until;) {
    std::this_thread::sleep_for(50ms);
    std::lock_guard<std::mutex> lock(mutex);
    if (!slow_reports.empty()) told = slow_reports.front();
  }
  BOOST_TEST(contains(told, "step 1 has run for "), told);
  BOOST_TEST(contains(told, "and goes on; stuck: worker:0 "), told);
  BOOST_TEST(contains(told, stuck), told);
  // Released, the step finishes, and the tasks have nothing in flight.
  session.run({}, {}, {put});
  BOOST_TEST(held.get()[0].scalar_value<float>() == 42.0f);
  auto [after, exited_0] = output_of(command);
  BOOST_TEST(exited_0);
  BOOST_TEST(contains(after, fmt::format("ps:0 at 127.0.0.1:{}: no step in flight", cluster.port("ps:0"))), after);
  BOOST_TEST(contains(after, fmt::format("worker:0 at 127.0.0.1:{}: no step in flight", cluster.port("worker:0"))),
             after);
}
