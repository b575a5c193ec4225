// A reply that never comes (actors/timeouts.hpp): when the actor a node asks is gone, the
// step fails with an error naming the node and what it waited for, and the session settles.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <future>
#include <thread>

#include "actors/state/param_shard.hpp"
#include "actors/session_impl.hpp"
#include "actors/state/queue_actor.hpp"
#include "actors/runtime.hpp"
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

// Kills `actor` and returns once it is gone.
template <class Handle>
void kill(Session& s, const Handle& actor) {
  caf::scoped_actor self{runtime_of(s)->system()};
  self->send_exit(actor, caf::exit_reason::kill);
  self->wait_for(actor);
}

// Waits, at most 5 s, until node `node` of the session waits for its queue to answer.
bool waits_for_its_queue(const Session& s, const std::string& node) {
  for (int i = 0; i < 500; ++i) {
    for (auto& w : s.waiting_nodes())
      if (w.node == node && !w.missing.empty() && contains(w.missing[0], "to answer")) return true;
    std::this_thread::sleep_for(10ms);
  }
  return false;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_read_from_a_parameter_shard_that_is_gone_fails_naming_the_node_and_the_variable) {
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("w"), {}, DType::float32);
  auto init = ops::assign(root, w, ops::constant(root, 1.0f));
  auto doubled = ops::mul(root.with_op_name("doubled"), w, ops::constant(root, 2.0f));
  Session s(root);
  s.run({}, {}, {init});
  BOOST_TEST(s.run({doubled})[0].scalar_value<float>() == 2.0f);

  kill(s, param_shards_of(s)->of("w"));
  auto m = error_of([&] { s.run({doubled}); }, ErrorCode::unavailable);
  BOOST_TEST(contains(m, "VariableV2 'w'"), m);
  BOOST_TEST(contains(m, "the parameter shard did not answer the read of variable 'w'"), m);
  BOOST_TEST(settles(s), s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(an_update_of_a_variable_whose_shard_is_gone_fails_naming_the_node) {
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("w"), {}, DType::float32);
  auto init = ops::assign(root.with_op_name("init"), w, ops::constant(root, 1.0f));
  Session s(root);
  kill(s, param_shards_of(s)->of("w"));
  auto m = error_of([&] { s.run({}, {}, {init}); }, ErrorCode::unavailable);
  BOOST_TEST(contains(m, "Assign 'init'"), m);
  BOOST_TEST(contains(m, "the parameter shard did not answer the update of variable 'w'"), m);
  BOOST_TEST(settles(s), s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(a_dequeue_from_a_queue_actor_that_is_gone_fails_naming_the_node_and_the_queue) {
  auto root = Scope::root();
  auto q = ops::Queue::fifo(root, {DType::float32}, {PartialShape{}}, {.shared_name = "gone"});
  auto next = q.dequeue(root.with_op_name("next"))[0];
  Session s(root);
  kill(s, runtime_of(s)->queue(q.spec()));
  auto m = error_of([&] { s.run({next}); }, ErrorCode::unavailable);
  BOOST_TEST(contains(m, "QueueDequeue 'next'"), m);
  BOOST_TEST(contains(m, "queue 'gone'"), m);  // "is gone" or "did not answer its QueueDequeue request"
  BOOST_TEST(settles(s), s.describe_waiting());
}

BOOST_AUTO_TEST_CASE(a_queue_actor_that_dies_holding_a_dequeue_fails_the_step_naming_the_node_and_the_queue) {
  auto root = Scope::root();
  auto q = ops::Queue::fifo(root, {DType::float32}, {PartialShape{}}, {.shared_name = "dies_holding"});
  auto next = q.dequeue(root.with_op_name("next"))[0];
  Session s(root);
  QueueActor queue = runtime_of(s)->queue(q.spec());
  // The deadline only keeps a failing test from hanging: the queue's death must fail the step
  // long before it.
  auto step = std::async(std::launch::async, [&] { return s.run({}, {next}, {}, {.timeout = 60s}); });
  BOOST_REQUIRE(waits_for_its_queue(s, "next"));
  {
    // Answered after the queue has taken the node's dequeue (sent before): the queue holds it.
    caf::scoped_actor self{runtime_of(s)->system()};
    self->request(queue, 10s, size_atom::value).receive([](QueueReply&) {}, [](caf::error&) {});
  }
  kill(s, queue);
  BOOST_REQUIRE_MESSAGE((step.wait_for(30s) == std::future_status::ready), "the step still waits for a dead queue");
  auto m = error_of([&] { step.get(); }, ErrorCode::unavailable);
  BOOST_TEST(contains(m, "QueueDequeue 'next'"), m);
  BOOST_TEST(contains(m, "queue 'dies_holding' is gone"), m);
  BOOST_TEST(settles(s), s.describe_waiting());
}
