// A reply that never comes (actors/timeouts.hpp): when the actor a node asks is gone, the
// step fails with an error naming the node and what it waited for, and the session settles.
#include <boost/test/unit_test.hpp>

#include "actors/param_shard.hpp"
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

namespace {

// Kills `actor` and returns once it is gone.
void kill(Session& s, const caf::actor& actor) {
  caf::scoped_actor self{s.runtime()->system()};
  self->send_exit(actor, caf::exit_reason::kill);
  self->wait_for(actor);
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

  kill(s, s.param_shards()->of("w"));
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
  kill(s, s.param_shards()->of("w"));
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
  kill(s, s.runtime()->queue(q.spec()));
  auto m = error_of([&] { s.run({next}); }, ErrorCode::unavailable);
  BOOST_TEST(contains(m, "QueueDequeue 'next'"), m);
  BOOST_TEST(contains(m, "queue 'gone' did not answer its QueueDequeue"), m);
  BOOST_TEST(settles(s), s.describe_waiting());
}
