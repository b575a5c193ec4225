// Queues: FIFO order across steps, waiting dequeues and enqueues that hold no thread, close,
// batches and the last partial batch, padding, seeded shuffling, sharing between sessions.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <chrono>
#include <future>
#include <numeric>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "ops/data/queue.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

using namespace std::chrono_literals;

// One queue of int32 scalars with the ops a test needs.
struct IntQueue {
  Scope root = Scope::root();
  ops::Queue q;
  Output x = ops::placeholder(root.with_op_name("x"), DType::int32, Shape{});
  Output xs = ops::placeholder(root.with_op_name("xs"), DType::int32, PartialShape{-1});
  Output n = ops::placeholder(root.with_op_name("n"), DType::int32, Shape{});
  Node* put;
  Node* put_many;
  Output get, size;
  std::vector<Output> get_many, get_up_to;
  Node* close;
  Node* close_cancel;
  explicit IntQueue(ops::Queue queue)
      : q(std::move(queue)),
        put(q.enqueue(root, {x})),
        put_many(q.enqueue_many(root, {xs})),
        get(q.dequeue(root)[0]),
        size(q.size(root)),
        get_many(q.dequeue_many(root, n)),
        get_up_to(q.dequeue_many(root, n, true)),
        close(q.close(root)),
        close_cancel(q.close(root, true)) {}
  static IntQueue fifo(ops::QueueOptions o = {}) {
    Scope s = Scope::root();
    return IntQueue(ops::Queue::fifo(s, {DType::int32}, {Shape{}}, o));
  }
};

std::vector<int32_t> values(const Tensor& t) { return {t.data<int32_t>(), t.data<int32_t>() + t.num_elements()}; }
Tensor ints(std::vector<int32_t> v) { return Tensor::from_vector<int32_t>(v); }

}  // namespace

BOOST_AUTO_TEST_CASE(a_fifo_queue_hands_out_elements_in_order_across_steps) {
  auto t = IntQueue::fifo({.shared_name = "order"});
  Session s(t.root);
  for (int32_t v : {4, 8, 15, 16, 23}) s.run({{t.x, Tensor::scalar(v)}}, {}, {t.put});
  BOOST_TEST(s.run({t.size})[0].scalar_value<int32_t>() == 5);
  std::vector<int32_t> got;
  for (int i = 0; i < 5; ++i) got.push_back(s.run({t.get})[0].scalar_value<int32_t>());
  BOOST_TEST(got == (std::vector<int32_t>{4, 8, 15, 16, 23}), boost::test_tools::per_element());
  BOOST_TEST(s.run({t.size})[0].scalar_value<int32_t>() == 0);
}

BOOST_AUTO_TEST_CASE(a_dequeue_on_an_empty_queue_waits_without_holding_the_only_scheduler_thread) {
  auto t = IntQueue::fifo({.shared_name = "waits"});
  Session s(t.root, SessionOptions{.threads = 1});
  auto waiting = std::async(std::launch::async, [&] { return s.run({t.get})[0].scalar_value<int32_t>(); });
  BOOST_TEST((waiting.wait_for(100ms) == std::future_status::timeout), "nothing to dequeue yet");
  auto why = s.describe_waiting();
  BOOST_TEST(contains(why, "waits for queue 'waits' to answer"), "a waiting dequeue explains itself: " << why);
  // With one scheduler thread, this step runs only if the waiting dequeue does not hold it.
  s.run({{t.x, Tensor::scalar(42)}}, {}, {t.put});
  BOOST_TEST(waiting.get() == 42);
}

BOOST_AUTO_TEST_CASE(closing_a_queue_wakes_a_waiting_dequeue_with_queue_closed) {
  auto t = IntQueue::fifo({.shared_name = "closing"});
  Session s(t.root);
  auto waiting = std::async(std::launch::async, [&] { s.run({t.get}); });
  BOOST_TEST((waiting.wait_for(50ms) == std::future_status::timeout));
  s.run({}, {}, {t.close});
  auto m = error_of([&] { waiting.get(); }, ErrorCode::out_of_range);
  BOOST_TEST(contains(m, "queue 'closing' is closed and has 0 element(s), fewer than the 1 requested"), m);
  BOOST_TEST(contains(m, "QueueDequeue"), "the error names the node: " << m);
  auto e = error_of([&] { s.run({{t.x, Tensor::scalar(1)}}, {}, {t.put}); }, ErrorCode::cancelled);
  BOOST_TEST(contains(e, "queue 'closing' is closed"), e);
}

BOOST_AUTO_TEST_CASE(dequeue_many_makes_batches_and_the_last_one_as_the_user_chose) {
  auto t = IntQueue::fifo({.shared_name = "batches"});
  Session s(t.root);
  s.run({{t.xs, ints({1, 2, 3, 4, 5})}}, {}, {t.put_many});
  auto b = s.run({{t.n, Tensor::scalar(2)}}, {t.get_many[0]})[0];
  BOOST_TEST(b.shape() == Shape({2}));
  BOOST_TEST(values(b) == (std::vector<int32_t>{1, 2}), boost::test_tools::per_element());
  BOOST_TEST(values(s.run({{t.n, Tensor::scalar(2)}}, {t.get_many[0]})[0]) == (std::vector<int32_t>{3, 4}),
             boost::test_tools::per_element());
  s.run({}, {}, {t.close});
  // One element left: a full batch cannot be had; with allow_smaller_final_batch the rest comes.
  auto m = error_of([&] { s.run({{t.n, Tensor::scalar(2)}}, {t.get_many[0]}); }, ErrorCode::out_of_range);
  BOOST_TEST(contains(m, "has 1 element(s), fewer than the 2 requested"), m);
  BOOST_TEST(values(s.run({{t.n, Tensor::scalar(2)}}, {t.get_up_to[0]})[0]) == (std::vector<int32_t>{5}),
             boost::test_tools::per_element());
  error_of([&] { s.run({{t.n, Tensor::scalar(2)}}, {t.get_up_to[0]}); }, ErrorCode::out_of_range);
}

BOOST_AUTO_TEST_CASE(a_full_queue_holds_an_enqueue_until_a_dequeue_makes_room) {
  auto t = IntQueue::fifo({.capacity = 2, .shared_name = "full"});
  Session s(t.root);
  auto putting = std::async(std::launch::async, [&] { s.run({{t.xs, ints({7, 8, 9})}}, {}, {t.put_many}); });
  BOOST_TEST((putting.wait_for(100ms) == std::future_status::timeout), "the third element waits for room");
  BOOST_TEST(s.run({t.get})[0].scalar_value<int32_t>() == 7);
  putting.get();
  BOOST_TEST(s.run({t.size})[0].scalar_value<int32_t>() == 2);
}

BOOST_AUTO_TEST_CASE(closing_with_cancel_pending_enqueues_fails_the_waiting_enqueue) {
  auto t = IntQueue::fifo({.capacity = 1, .shared_name = "cancel"});
  Session s(t.root);
  auto putting = std::async(std::launch::async, [&] { s.run({{t.xs, ints({1, 2})}}, {}, {t.put_many}); });
  BOOST_TEST((putting.wait_for(50ms) == std::future_status::timeout));
  s.run({}, {}, {t.close_cancel});
  auto m = error_of([&] { putting.get(); }, ErrorCode::cancelled);
  BOOST_TEST(contains(m, "closed with its pending enqueues cancelled"), m);
  BOOST_TEST(s.run({t.get})[0].scalar_value<int32_t>() == 1, "what was enqueued stays");
}

BOOST_AUTO_TEST_CASE(a_padding_fifo_queue_pads_a_batch_to_its_longest_element) {
  auto root = Scope::root();
  auto q = ops::Queue::padding_fifo(root, {DType::float32}, {PartialShape{-1}}, {.shared_name = "padding"});
  auto v = ops::placeholder(root, DType::float32, PartialShape{-1});
  auto put = q.enqueue(root, {v});
  auto batch = q.dequeue_many(root, ops::constant(root, 3))[0];
  Session s(root);
  for (auto& e : std::vector<std::vector<float>>{{1, 2}, {3, 4, 5, 6}, {7, 8, 9}})
    s.run({{v, Tensor::from_vector<float>(e)}}, {}, {put});
  auto b = s.run({batch})[0];
  BOOST_TEST(b.shape() == Shape({3, 4}));
  std::vector<float> got(b.data<float>(), b.data<float>() + 12);
  BOOST_TEST(got == (std::vector<float>{1, 2, 0, 0, 3, 4, 5, 6, 7, 8, 9, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_random_shuffle_queue_permutes_by_its_seed_and_keeps_min_after_dequeue_back) {
  auto drain = [](const std::string& name, int64_t seed) {
    Scope root = Scope::root();
    auto t = IntQueue(ops::Queue::random_shuffle(root, {DType::int32}, {Shape{}},
                                                 {.shared_name = name, .min_after_dequeue = 10, .seed = seed}));
    Session s(t.root);
    std::vector<int32_t> all(50);
    std::iota(all.begin(), all.end(), 0);
    s.run({{t.xs, ints(all)}}, {}, {t.put_many});
    auto first = values(s.run({{t.n, Tensor::scalar(40)}}, {t.get_many[0]})[0]);
    // 10 are kept back until the queue is closed.
    auto waiting = std::async(std::launch::async, [&] { return s.run({t.get}); });
    BOOST_TEST((waiting.wait_for(50ms) == std::future_status::timeout), "min_after_dequeue keeps 10 back");
    s.run({}, {}, {t.close});
    first.push_back(waiting.get()[0].scalar_value<int32_t>());
    auto rest = values(s.run({{t.n, Tensor::scalar(9)}}, {t.get_many[0]})[0]);
    first.insert(first.end(), rest.begin(), rest.end());
    return first;
  };
  auto a = drain("shuffle_a", 7), b = drain("shuffle_b", 7), c = drain("shuffle_c", 8);
  std::vector<int32_t> sorted = a;
  std::sort(sorted.begin(), sorted.end());
  std::vector<int32_t> all(50);
  std::iota(all.begin(), all.end(), 0);
  BOOST_TEST(sorted == all, boost::test_tools::per_element());
  BOOST_TEST((a != all), "shuffled");
  BOOST_TEST((a == b), "the same seed gives the same order");
  BOOST_TEST((a != c), "another seed another");
}

BOOST_AUTO_TEST_CASE(sessions_of_one_process_share_a_queue_by_name) {
  auto producer = IntQueue::fifo({.shared_name = "shared"});
  auto consumer = IntQueue::fifo({.shared_name = "shared"});
  Session a(producer.root), b(consumer.root);
  a.run({{producer.xs, ints({5, 6})}}, {}, {producer.put_many});
  BOOST_TEST(b.run({consumer.get})[0].scalar_value<int32_t>() == 5);
  BOOST_TEST(a.run({producer.get})[0].scalar_value<int32_t>() == 6);
  // Another spec under the same name is refused.
  auto root = Scope::root();
  auto other = ops::Queue::fifo(root, {DType::float32}, {Shape{}}, {.shared_name = "shared"}).size(root);
  Session c(root);
  auto m = error_of([&] { c.run({other}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "queue 'shared' exists as FIFOQueue 'shared' (int32 [])"), m);
}

BOOST_AUTO_TEST_CASE(an_element_of_the_wrong_shape_is_refused_naming_the_queue) {
  auto root = Scope::root();
  auto q = ops::Queue::fifo(root, {DType::float32}, {Shape{3}}, {.shared_name = "shapes"});
  auto v = ops::placeholder(root, DType::float32, PartialShape{-1});
  auto put = q.enqueue(root, {v});
  Session s(root);
  auto m = error_of([&] { s.run({{v, Tensor::from_vector<float>({1, 2})}}, {}, {put}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "FIFOQueue 'shapes' (float32 [3]): component 0 has shape [2], the queue takes [3]"), m);
  auto b = error_of([&] { q.enqueue(root, {ops::constant(root, 1)}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(b, "component 0 of FIFOQueue 'shapes' (float32 [3]) is float32, got int32"), b);
}

BOOST_AUTO_TEST_CASE(a_while_loop_dequeues_one_element_per_iteration) {
  // sum of the first n elements of the queue, dequeued inside the loop's body.
  auto t = IntQueue::fifo({.shared_name = "in_a_loop"});
  auto out = ops::while_loop(
      t.root, [&](const Scope& s, const std::vector<Output>& v) { return ops::less(s, v[0], t.n); },
      [&](const Scope& s, const std::vector<Output>& v) {
        auto e = t.q.dequeue(s)[0];
        return std::vector<Output>{ops::add(s, v[0], ops::constant(s, 1)), ops::add(s, v[1], e)};
      },
      {ops::constant(t.root, 0), ops::constant(t.root, 0)});
  Session s(t.root);
  s.run({{t.xs, ints({1, 2, 3, 4, 5, 6})}}, {}, {t.put_many});
  BOOST_TEST(s.run({{t.n, Tensor::scalar(4)}}, {out[1]})[0].scalar_value<int32_t>() == 10);
  BOOST_TEST(s.run({t.size})[0].scalar_value<int32_t>() == 2, "the loop took exactly four");
}

BOOST_AUTO_TEST_CASE(dequeue_many_of_a_negative_count_is_refused_naming_the_node) {
  auto t = IntQueue::fifo({.shared_name = "negative"});
  Session s(t.root);
  auto m = error_of([&] { s.run({{t.n, Tensor::scalar(-1)}}, {t.get_many[0]}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "QueueDequeueMany"), m);
  BOOST_TEST(contains(m, "n must be a non-negative int32 scalar"), m);
}
