// A step stuck in another process explains itself: troupe-node processes on 127.0.0.1 (ps:0 and
// worker:0); a dequeue on ps:0 from an empty queue holds a step whose product runs on worker:0.
// At the step's deadline the error names, per task still running, the nodes that wait and what
// for: worker:0's _Recv waits for the dequeued value from ps:0, ps:0's dequeue for its queue. Every
// process is stopped by its pid, also when a check fails.
#include <boost/test/unit_test.hpp>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "ops/data/queue.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/node_cluster.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using troupe::testing::contains;
using troupe::testing::error_of;

BOOST_AUTO_TEST_CASE(a_step_stuck_on_a_queue_in_another_process_names_the_waits_of_every_task) {
  troupe::testing::NodeCluster cluster({{"ps", 1}, {"worker", 1}});
  auto root = Scope::root();
  auto on_ps = root.with_device("/job:ps/task:0");
  auto q = ops::Queue::fifo(on_ps, {DType::float32}, {PartialShape{}}, {.shared_name = "stuck"});
  auto next = q.dequeue(on_ps.with_op_name("next"))[0];
  auto doubled = ops::mul(root.with_device("/job:worker/task:0").with_op_name("doubled"), next,
                          ops::constant(root, 2.0f));
  Session session(root, cluster.session_on("worker:0"));
  auto m = error_of([&] { session.run({}, {doubled}, {}, {.timeout = 1500ms}); }, ErrorCode::deadline_exceeded);
  BOOST_TEST(contains(m, "did not finish within its deadline"), m);
  BOOST_TEST(contains(m, "nodes still waiting"), m);
  BOOST_TEST(contains(m, "task ps:0"), m);
  BOOST_TEST(contains(m, "'next' has 0 of 1 inputs, waits for queue 'stuck' to answer"), m);
  BOOST_TEST(contains(m, "task worker:0"), m);
  BOOST_TEST(contains(m, "waits for the value of 'next:0' from /job:ps/task:0/device:CPU:0"), m);
  BOOST_TEST_MESSAGE(m);
}
