// replica_device_setter: variables spread over ps tasks by bytes, every op on a variable beside
// it, every other op on the worker device, an op's own request kept field by field; and the
// graph it makes runs in a local session unchanged.
#include <boost/test/unit_test.hpp>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "ops/state/replica_device_setter.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

BOOST_AUTO_TEST_SUITE(replica_device_setter_suite)

BOOST_AUTO_TEST_CASE(each_variable_goes_to_the_ps_task_holding_the_fewest_bytes_so_far) {
  auto root = Scope::root();
  auto s = root.with_device_function(replica_device_setter(2));
  auto big = ops::variable(s.with_op_name("big"), {1000, 10}, DType::float32);    // 40,000 bytes: task 0
  auto small = ops::variable(s.with_op_name("small"), {10}, DType::float32);      // task 1 (0 bytes so far)
  auto other = ops::variable(s.with_op_name("other"), {100, 10}, DType::float32); // task 1 (40 < 40,000)
  auto more = ops::variable(s.with_op_name("more"), {2000}, DType::float64);      // task 1 (4,040 < 40,000)
  BOOST_TEST(big.node()->requested_device == "/job:ps/task:0");
  BOOST_TEST(small.node()->requested_device == "/job:ps/task:1");
  BOOST_TEST(other.node()->requested_device == "/job:ps/task:1");
  BOOST_TEST(more.node()->requested_device == "/job:ps/task:1");
}

BOOST_AUTO_TEST_CASE(ops_on_a_variable_follow_it_and_other_ops_go_to_the_worker) {
  auto root = Scope::root();
  auto s = root.with_device_function(replica_device_setter(2, {.worker_device = "/job:worker/task:3"}));
  auto a = ops::variable(s.with_op_name("a"), {4}, DType::float32);
  auto b = ops::variable(s.with_op_name("b"), {4}, DType::float32);
  auto init = ops::assign(s, b, ops::constant<float>(s, {1, 2, 3, 4}, {4}));
  auto sum = ops::add(s, a, b);
  BOOST_TEST(a.node()->requested_device == "/job:ps/task:0");
  BOOST_TEST(b.node()->requested_device == "/job:ps/task:1");
  BOOST_TEST(init.node()->requested_device == "/job:ps/task:1");
  BOOST_TEST(sum.node()->requested_device == "/job:worker/task:3");
  // An op's own request wins field by field.
  auto pinned = ops::mul(s.with_device("/device:CPU:1"), a, b);
  BOOST_TEST(pinned.node()->requested_device == "/job:worker/task:3/device:CPU:1");
  auto elsewhere = ops::variable(s.with_device("/job:ps/task:0").with_op_name("elsewhere"), {4}, DType::float32);
  BOOST_TEST(elsewhere.node()->requested_device == "/job:ps/task:0");
}

BOOST_AUTO_TEST_CASE(a_model_built_for_two_ps_tasks_trains_in_a_local_session) {
  auto root = Scope::root();
  auto s = root.with_device_function(replica_device_setter(2));
  auto x = ops::placeholder(s.with_op_name("x"), DType::float32, {4, 3});
  auto w = ops::variable(s.with_op_name("w"), {3, 1}, DType::float32);
  auto b = ops::variable(s.with_op_name("b"), {1}, DType::float32);
  auto init = ops::group(s, {ops::assign(s, w, ops::fill(s, {3, 1}, ops::constant(s, 0.5f))),
                             ops::assign(s, b, ops::constant<float>(s, {0.0f}, {1}))});
  auto loss = ops::mean(s, ops::square(s, ops::add(s, ops::matmul(s, x, w), b)));
  Node* train = Optimizer::momentum(0.1, 0.9).minimize(s, loss);
  Session session(root);  // one process: the jobs and tasks asked for are its own
  session.run({}, {}, {init});
  const FeedList feeds = {{x, Tensor::from_vector<float>({1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, {4, 3})}};
  const float before = session.run(feeds, {loss})[0].scalar_value<float>();
  for (int i = 0; i < 20; ++i) session.run(feeds, {}, {train});
  BOOST_TEST(session.run(feeds, {loss})[0].scalar_value<float>() < before / 4);
}

BOOST_AUTO_TEST_CASE(no_ps_task_is_refused) {
  auto message = error_of([] { replica_device_setter(0); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(message, "ps_tasks must be at least 1"), message);
}

BOOST_AUTO_TEST_SUITE_END()
