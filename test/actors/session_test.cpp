// Session: what is refused before a step starts, what is cached, and what outlives a step.
#include <boost/test/unit_test.hpp>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "ops/data/queue.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/settles.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;
using troupe::testing::settles;
using namespace std::chrono_literals;

namespace {

struct Fixture {
  Scope root = Scope::root();
  Output x = ops::placeholder(root.with_op_name("x"), DType::float32, {-1, 2});
  Output y = ops::sum(root.with_op_name("y"), ops::square(root, x));
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_feed_of_the_wrong_dtype_is_refused_before_the_step) {
  Fixture f;
  Session s(f.root);
  auto m = error_of([&] { s.run({{f.x, Tensor::from_vector<double>({1, 2}, {1, 2})}}, {f.y}); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "feed 'x:0' has dtype float64"), m);
  BOOST_TEST(contains(m, "float32"), m);
  BOOST_TEST(s.num_executables() == 0);
}

BOOST_AUTO_TEST_CASE(a_feed_of_the_wrong_shape_is_refused_before_the_step) {
  Fixture f;
  Session s(f.root);
  auto m = error_of([&] { s.run({{f.x, Tensor::from_vector<float>({1, 2, 3}, {1, 3})}}, {f.y}); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "[1,3]"), m);
  BOOST_TEST(contains(m, "[?,2]"), m);
  // Any number of rows fits [?,2].
  BOOST_TEST(s.run({{f.x, Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2})}}, {f.y})[0].scalar_value<float>() == 91.0f);
}

BOOST_AUTO_TEST_CASE(unknown_names_are_refused_naming_them) {
  Fixture f;
  Session s(f.root);
  auto m = error_of([&] { s.run({"nope:0"}); }, ErrorCode::not_found);
  BOOST_TEST(contains(m, "nope"), m);
  m = error_of([&] { s.run({{"x", Tensor::from_vector<float>({1, 2}, {1, 2})}}, {"y:3"}); },
               ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "y:3"), m);
  m = error_of([&] { s.run({}, {}, {"missing_target"}); }, ErrorCode::not_found);
  BOOST_TEST(contains(m, "missing_target"), m);
}

BOOST_AUTO_TEST_CASE(a_fetch_that_cannot_be_computed_is_refused_before_the_step) {
  Fixture f;
  Session s(f.root);
  auto m = error_of([&] { s.run({f.y}); }, ErrorCode::failed_precondition);
  BOOST_TEST(contains(m, "placeholder 'x'"), m);
  BOOST_TEST(contains(m, "not fed"), m);
}

BOOST_AUTO_TEST_CASE(executables_are_cached_per_signature) {
  Fixture f;
  Session s(f.root);
  auto in = Tensor::from_vector<float>({1, 1}, {1, 2});
  s.run({{f.x, in}}, {f.y});
  s.run({{f.x, in}}, {f.y});
  BOOST_TEST(s.num_executables() == 1);
  s.run({{f.x, in}}, {f.y, f.x});
  BOOST_TEST(s.num_executables() == 2);
}

BOOST_AUTO_TEST_CASE(the_graph_may_grow_between_runs) {
  Fixture f;
  Session s(f.root);
  auto in = Tensor::from_vector<float>({1, 2}, {1, 2});
  BOOST_TEST(s.run({{f.x, in}}, {f.y})[0].scalar_value<float>() == 5.0f);
  auto z = ops::mul(f.root, f.y, ops::constant(f.root, 2.0f));
  BOOST_TEST(s.run({{f.x, in}}, {z})[0].scalar_value<float>() == 10.0f);
}

BOOST_AUTO_TEST_CASE(reading_an_uninitialised_variable_fails_naming_it) {
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("w"), {2}, DType::float32);
  Session s(root);
  auto m = error_of([&] { s.run({w}); }, ErrorCode::failed_precondition);
  BOOST_TEST(contains(m, "VariableV2 'w'"), m);
  BOOST_TEST(contains(m, "not initialised"), m);
  // The failed node's device, as data (what recovery reads).
  try {
    s.run({w});
    BOOST_FAIL("the step did not fail");
  } catch (const Error& e) {
    BOOST_TEST(e.device() == "/job:localhost/task:0/device:CPU:0");
  }
}

BOOST_AUTO_TEST_CASE(variables_persist_across_runs_and_belong_to_their_session) {
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("w"), {}, DType::float64);
  auto init = ops::assign(root, w, ops::constant(root, 1.0));
  auto grow = ops::assign_add(root, w, ops::constant(root, 0.5));
  Session a(root), b(root);
  a.run({}, {}, {init});
  for (int i = 0; i < 4; ++i) a.run({}, {}, {grow});
  BOOST_TEST(a.run({w})[0].scalar_value<double>() == 3.0);
  BOOST_TEST(a.variable_names() == std::vector<std::string>{"w"}, boost::test_tools::per_element());
  BOOST_TEST(b.variable_names().empty());
  BOOST_CHECK_THROW(b.run({w}), Error);
}

BOOST_AUTO_TEST_CASE(a_value_once_read_does_not_change_when_the_variable_does) {
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("w"), {3}, DType::float32);
  auto init = ops::assign(root, w, ops::constant<float>(root, {1, 2, 3}, {3}));
  auto grow = ops::assign_add(root, w, ops::constant<float>(root, {1, 1, 1}, {3}));
  Session s(root);
  s.run({}, {}, {init});
  auto before = s.run({w})[0];
  s.run({}, {}, {grow});
  BOOST_TEST(before.to_vector<float>() == std::vector<float>({1, 2, 3}), boost::test_tools::per_element());
  BOOST_TEST(s.run({w})[0].to_vector<float>() == std::vector<float>({2, 3, 4}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(an_assign_of_another_shape_is_refused) {
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("w"), {2}, DType::float32);
  BOOST_CHECK_THROW(ops::assign(root, w, ops::constant<float>(root, {1, 2, 3}, {3})), Error);
  // Without validation the variable takes the new shape.
  auto reshape = ops::assign(root, w, ops::constant<float>(root, {1, 2, 3}, {3}), false);
  Session s(root);
  s.run({}, {}, {reshape});
  BOOST_TEST(s.run({w})[0].num_elements() == 3);
}

BOOST_AUTO_TEST_CASE(nothing_waits_once_the_steps_are_done) {
  Fixture f;
  Session s(f.root);
  s.run({{f.x, Tensor::from_vector<float>({1, 2}, {1, 2})}}, {f.y});
  BOOST_TEST(s.waiting_nodes().empty());
  BOOST_TEST(s.describe_waiting().empty());
}

BOOST_AUTO_TEST_CASE(soft_placement_runs_a_gpu_request_on_the_cpu_when_no_gpu_kernel_applies) {
  auto root = Scope::root();
  auto a = ops::constant(root.with_device("/device:GPU:0"), 2.0f);
  auto b = ops::square(root.with_device("/device:GPU:0"), a);
  Session s(root);
  BOOST_TEST(s.run({b})[0].scalar_value<float>() == 4.0f);
  Session strict(root, {.allow_soft_placement = false});
  BOOST_CHECK_THROW(strict.run({b}), Error);
}

BOOST_AUTO_TEST_CASE(each_device_has_an_actor_that_reports_its_memory) {
  auto root = Scope::root();
  auto big = ops::random_uniform(root, {1024, 1024});
  Session s(root);
  auto devices = s.devices();
  BOOST_REQUIRE(!devices.empty());
  BOOST_TEST(devices[0].name == "/job:localhost/task:0/device:CPU:0");
  auto held = s.run({big});  // 4 MiB alive while we look
  auto after = s.devices();
  BOOST_TEST(after[0].bytes_in_use >= 4u * 1024 * 1024);
  BOOST_TEST(after[0].peak_bytes >= after[0].bytes_in_use);
}

BOOST_AUTO_TEST_CASE(prepare_builds_the_executable_before_the_first_run) {
  Fixture f;
  Session s(f.root);
  s.prepare({"x"}, {f.y});
  BOOST_TEST(s.num_executables() == 1);
  s.run({{f.x, Tensor::from_vector<float>({1, 2}, {1, 2})}}, {f.y});
  BOOST_TEST(s.num_executables() == 1);
  BOOST_CHECK_THROW(s.prepare({}, {"no_such_node:0"}), Error);
}

BOOST_AUTO_TEST_CASE(a_step_past_its_deadline_is_aborted_naming_the_nodes_still_waiting) {
  auto root = Scope::root();
  auto q = ops::Queue::fifo(root, {DType::float32}, {PartialShape{}}, {.shared_name = "late"});
  auto next = q.dequeue(root.with_op_name("next"))[0];
  auto doubled = ops::mul(root.with_op_name("doubled"), next, ops::constant(root, 2.0f));
  Session s(root);
  auto m = error_of([&] { s.run({}, {doubled}, {}, {.timeout = 100ms}); }, ErrorCode::deadline_exceeded);
  BOOST_TEST(contains(m, "did not finish within its deadline of 100 ms and was aborted"), m);
  BOOST_TEST(contains(m, "node 'next'"), m);
  BOOST_TEST_MESSAGE(m);
  BOOST_TEST(settles(s), s.describe_waiting());
  // The aborted step withdrew its dequeue: the next element goes to the next step.
  auto put = q.enqueue(root, {ops::constant(root, 21.0f)});
  s.run({}, {}, {put});
  BOOST_TEST(s.run({doubled})[0].scalar_value<float>() == 42.0f);
}

BOOST_AUTO_TEST_CASE(an_endless_loop_is_stopped_by_the_sessions_operation_timeout) {
  auto root = Scope::root();
  auto out = ops::while_loop(
      root, [](const Scope& s, const std::vector<Output>& v) { return ops::greater_equal(s, v[0], ops::constant(s, 0)); },
      [](const Scope& s, const std::vector<Output>& v) {
        return std::vector<Output>{ops::add(s, v[0], ops::constant(s, 1))};
      },
      {ops::constant(root, 0)}, {.name = "forever"});
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, Shape{});
  auto y = ops::neg(root, x);
  Session s(root, {.operation_timeout = 200ms});
  auto m = error_of([&] { s.run({out[0]}); }, ErrorCode::deadline_exceeded);
  BOOST_TEST(contains(m, "deadline of 200 ms"), m);
  BOOST_TEST(settles(s), "the aborted loop keeps no frame:\n" << s.describe_waiting());
  BOOST_TEST(s.run({{x, Tensor::scalar(3.0f)}}, {y})[0].scalar_value<float>() == -3.0f);
  // A run's own timeout wins over the session's.
  auto own = error_of([&] { s.run({}, {out[0]}, {}, {.timeout = 50ms}); }, ErrorCode::deadline_exceeded);
  BOOST_TEST(contains(own, "deadline of 50 ms"), own);
}

BOOST_AUTO_TEST_CASE(a_step_within_its_deadline_returns_its_fetches) {
  Fixture f;
  Session s(f.root, {.operation_timeout = 10s});
  auto out = s.run({{f.x, Tensor::from_vector<float>({1, 2}, {1, 2})}}, {f.y}, {}, {.timeout = 10s});
  BOOST_TEST(out[0].scalar_value<float>() == 5.0f);
}
