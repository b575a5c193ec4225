// Synchronous replicas (ops/state/sync_replicas.hpp) on a cluster of troupe-node processes on
// 127.0.0.1 (ps:0 and three workers): each replica runs its own session and graph, as between-
// graph replication does; the ps applies the average of the first m gradients of a step once,
// increments the global step, releases the waiting replicas, and drops (and counts) a gradient
// of a step that has passed. Every process is stopped by its pid, also when a check fails.
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <fstream>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "actors/session.hpp"
#include "actors/cluster/supervisor.hpp"
#include "ops/all.hpp"
#include "ops/state/replica_device_setter.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/node_cluster.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

// ps:0 and worker:0..2.
struct PsAndWorkers : troupe::testing::NodeCluster {
  PsAndWorkers() : NodeCluster({{"ps", 1}, {"worker", 3}}) {}
  SessionOptions on_worker(int k) const { return session_on(fmt::format("worker:{}", k)); }
};

// One replica's graph: loss = sum(w * x) with x fed, so the gradient of w is x; SGD with rate 1.
struct Replica {
  int index;
  Scope root = Scope::root();
  Scope s = root.with_device_function(
      replica_device_setter(1, {.worker_device = fmt::format("/job:worker/task:{}", index)}));
  ops::GlobalStep step = ops::global_step(s);
  Output w = ops::variable(s.with_op_name("w"), ops::constant<float>(s, {10.0f, 20.0f}, {2}));
  Output x = ops::placeholder(s.with_op_name("x"), DType::float32, {2});
  SyncTrainOp train;
  Replica(int index, int m, int n, std::chrono::milliseconds vote_timeout = std::chrono::minutes(5)) : index(index) {
    SyncReplicasOptimizer sync(Optimizer::sgd(1.0), {.replicas_to_aggregate = m,
                                                     .total_replicas = n,
                                                     .replica = index,
                                                     .vote_timeout = vote_timeout});
    train = sync.minimize(s, ops::sum(s, ops::mul(s, w, x)), step.value, {w});
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(two_of_three_replicas_apply_one_average_per_global_step_and_a_late_gradient_is_dropped) {
  PsAndWorkers cluster;
  Replica r0(0, 2, 3), r1(1, 2, 3), r2(2, 2, 3);
  Session s0(r0.root, cluster.on_worker(0)), s1(r1.root, cluster.on_worker(1)), s2(r2.root, cluster.on_worker(2));
  // The chief initialises: the variables, then the global step.
  s0.run({}, {}, {ops::variables_initializer(r0.root, {r0.w, r0.train.dropped_counters[0], r0.train.dropped_counters[1],
                                                        r0.train.dropped_counters[2]})});
  s0.run({}, {}, {r0.step.init});
  auto step_of = [](Session& session, Replica& r, std::vector<float> x, FeedList extra = {}) {
    FeedList feeds = {{r.x, Tensor::from_vector<float>(x)}};
    for (auto& f : extra) feeds.push_back(f);
    auto out = session.run(feeds, {r.train.next_step, r.train.dropped}, {r.train.op});
    return std::pair{out[0].scalar_value<int64_t>(), out[1].scalar_value<int64_t>()};
  };
  // Replica 0 alone does not move the step: it waits for a second vote.
  auto first = std::async(std::launch::async, [&] { return step_of(s0, r0, {1, 2}); });
  BOOST_TEST((first.wait_for(500ms) == std::future_status::timeout));
  auto second = step_of(s1, r1, {3, 6});
  auto got = first.get();
  BOOST_TEST(got.first == 1);  // both released into global step 1
  BOOST_TEST(got.second == 0);
  BOOST_TEST(second.first == 1);
  BOOST_TEST(second.second == 0);
  // Applied once, the average: w -= ((1,2) + (3,6)) / 2.
  auto w = s2.run({r2.w})[0].to_vector<float>();
  BOOST_TEST(w == (std::vector<float>{8.0f, 16.0f}), w[0] << ", " << w[1]);
  // Replica 2's gradient of step 0 (its read of the global step fed as 0: computed before the
  // step passed) is dropped, counted for it, and it goes on at once into step 1.
  auto late = step_of(s2, r2, {100, 100}, {{r2.step.value, Tensor::scalar<int64_t>(0)}});
  BOOST_TEST(late.first == 1);
  BOOST_TEST(late.second == 1);
  w = s2.run({r2.w})[0].to_vector<float>();
  BOOST_TEST(w == (std::vector<float>{8.0f, 16.0f}), w[0] << ", " << w[1]);
  auto counters = s0.run({r0.train.dropped_counters[0], r0.train.dropped_counters[1], r0.train.dropped_counters[2],
                          r0.step.value});
  BOOST_TEST(counters[0].scalar_value<int64_t>() == 0);
  BOOST_TEST(counters[1].scalar_value<int64_t>() == 0);
  BOOST_TEST(counters[2].scalar_value<int64_t>() == 1);
  BOOST_TEST(counters[3].scalar_value<int64_t>() == 1);  // the global step counts applied updates
  // Step 1 with replicas 2 and 0: w -= ((5,5) + (1,1)) / 2.
  auto third = std::async(std::launch::async, [&] { return step_of(s2, r2, {5, 5}); });
  auto fourth = step_of(s0, r0, {1, 1});
  BOOST_TEST(third.get().first == 2);
  BOOST_TEST(fourth.first == 2);
  w = s1.run({r1.w})[0].to_vector<float>();
  BOOST_TEST(w == (std::vector<float>{5.0f, 13.0f}), w[0] << ", " << w[1]);
}

BOOST_AUTO_TEST_CASE(a_replica_waiting_for_votes_that_never_come_fails_at_its_deadline_naming_the_ps_it_waits_on) {
  PsAndWorkers cluster;
  Replica r0(0, 2, 2);
  auto options = cluster.on_worker(0);
  options.operation_timeout = 2s;
  Session s0(r0.root, options);
  s0.run({}, {}, {ops::global_variables_initializer(r0.root)});
  auto e = error_of([&] { s0.run({{r0.x, Tensor::from_vector<float>({1, 1})}}, {r0.train.next_step}, {r0.train.op}); }, ErrorCode::deadline_exceeded);
  BOOST_TEST(contains(e, "did not finish within its deadline"), e);
  BOOST_TEST(contains(e, "still running on task ps:0"), e);
  // The report names the node on ps:0 and what it waits for: the vote of replica 1.
  BOOST_TEST(contains(e, "'sync_replicas/next_step' waits for the votes of the synchronous replicas for step 0 of "
                         "'global_step': 1 of the 2 needed are in (worker:0), missing worker:1"),
             e);
}

BOOST_AUTO_TEST_CASE(a_killed_replica_fails_the_step_at_the_vote_bound_naming_it_and_the_slow_step_report_names_it) {
  PsAndWorkers cluster;
  // No operation_timeout, no supervisor: only the vote bound ends the wait.
  Replica bounded(0, 2, 2, 3s), r1(1, 2, 2);
  std::mutex mutex;
  std::vector<std::string> reports;
  auto options = cluster.on_worker(0);
  options.slow_step_report = 1s;
  options.on_slow_step = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    reports.push_back(line);
  };
  Session s0(bounded.root, options), s1(r1.root, cluster.on_worker(1));
  s0.run({}, {}, {ops::global_variables_initializer(bounded.root)});
  // Both replicas take a step together: the shard learns each replica's task from its vote.
  auto together = std::async(std::launch::async, [&] {
    return s1.run({{r1.x, Tensor::from_vector<float>({1, 1})}}, {r1.train.next_step}, {r1.train.op})[0]
        .scalar_value<int64_t>();
  });
  BOOST_TEST(s0.run({{bounded.x, Tensor::from_vector<float>({1, 1})}}, {bounded.train.next_step}, {bounded.train.op})[0]
                 .scalar_value<int64_t>() == 1);
  BOOST_TEST(together.get() == 1);
  cluster.node("worker:1").signal(SIGKILL);  // replica 1's process dies
  const auto start = std::chrono::steady_clock::now();
  auto step = std::async(std::launch::async, [&] {
    return error_of([&] { s0.run({{bounded.x, Tensor::from_vector<float>({1, 1})}}, {bounded.train.next_step}, {bounded.train.op}); },
                    ErrorCode::deadline_exceeded);
  });
  // While it waits, troupe-node --status's report names the missing replica too.
  std::this_thread::sleep_for(1500ms);
  troupe::testing::ChildProcess status({TROUPE_NODE_BINARY, "--status", fmt::format("127.0.0.1:{}", cluster.port("ps:0"))},
                                       cluster.dir().file("status.out"), cluster.dir().file("status.err"));
  BOOST_TEST(status.wait_exit(20s).value_or(-1) == 0, status.err());
  BOOST_TEST(contains(status.out(), "missing worker:1"), status.out());
  const std::string e = step.get();
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  BOOST_TEST_MESSAGE(e);
  BOOST_TEST(contains(e, "1 of the 2 needed are in (worker:0), missing worker:1"), e);
  BOOST_TEST(contains(e, "did not come within 3."), e);
  BOOST_TEST(waited >= 2.9);
  BOOST_TEST(waited < 30.0);
  std::lock_guard<std::mutex> lock(mutex);
  BOOST_TEST_REQUIRE(!reports.empty(), "no slow-step report within the 3 s the step waited");
  BOOST_TEST(contains(reports.front(), "missing worker:1"), reports.front());
}

BOOST_AUTO_TEST_CASE(sync_replicas_refuses_more_replicas_to_aggregate_than_replicas) {
  auto e = error_of([] { SyncReplicasOptimizer(Optimizer::sgd(0.1), {.replicas_to_aggregate = 3, .total_replicas = 2}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(e, "replicas_to_aggregate must be 1 to total_replicas (2), got 3"), e);
  e = error_of([] { SyncReplicasOptimizer(Optimizer::sgd(0.1), {.replicas_to_aggregate = 1, .total_replicas = 2, .replica = 2}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(e, "replica 2 is not one of the 2 replicas"), e);
}

BOOST_AUTO_TEST_CASE(stopping_the_replicas_lets_a_replica_waiting_for_a_step_that_will_not_come_go_on) {
  PsAndWorkers cluster;
  Replica r0(0, 2, 2), r1(1, 2, 2);
  Session s0(r0.root, cluster.on_worker(0)), s1(r1.root, cluster.on_worker(1));
  s0.run({}, {}, {ops::global_variables_initializer(r0.root)});
  // Replica 1 votes alone: nobody else will.
  auto waiting = std::async(std::launch::async, [&] {
    return s1.run({{r1.x, Tensor::from_vector<float>({1, 1})}}, {r1.train.next_step}, {r1.train.op})[0]
        .scalar_value<int64_t>();
  });
  BOOST_TEST((waiting.wait_for(500ms) == std::future_status::timeout));
  BOOST_TEST(s0.run({Output(r0.train.stop)})[0].scalar_value<int64_t>() == 0);
  BOOST_TEST(waiting.get() == 0);  // let go at the step it waited on: training is over
  // A vote after the stop is answered at once; the global step stays.
  BOOST_TEST(s1.run({{r1.x, Tensor::from_vector<float>({1, 1})}}, {r1.train.next_step}, {r1.train.op})[0]
                 .scalar_value<int64_t>() == 0);
  BOOST_TEST(s0.run({r0.step.value})[0].scalar_value<int64_t>() == 0);
}

BOOST_AUTO_TEST_CASE(lowering_m_completes_the_step_a_lost_replica_holds_up_and_raising_it_waits_for_both_again) {
  PsAndWorkers cluster;
  Replica r0(0, 2, 2), r1(1, 2, 2);
  Session s0(r0.root, cluster.on_worker(0)), s1(r1.root, cluster.on_worker(1));
  s0.run({}, {}, {ops::global_variables_initializer(r0.root)});
  auto step_of_replica_1 = [&](std::vector<float> x) {
    return std::async(std::launch::async, [&s1, &r1, x] {
      return s1.run({{r1.x, Tensor::from_vector<float>(x)}}, {r1.train.next_step}, {r1.train.op})[0].scalar_value<int64_t>();
    });
  };
  auto w = [&] { return s0.run({r0.w})[0].to_vector<float>(); };
  // Replica 1 sends its gradient (x) and waits for replica 0, which is lost.
  auto waiting = step_of_replica_1({1, 2});
  BOOST_TEST((waiting.wait_for(500ms) == std::future_status::timeout));
  // m lowered to 1: the step completes with the one gradient in.
  s0.run({{r0.train.aggregate, Tensor::scalar<int64_t>(1)}}, {}, {r0.train.set_aggregate});
  BOOST_TEST(waiting.get() == 1);
  BOOST_TEST(w() == (std::vector<float>{9, 18}));
  // Replica 1 goes on alone.
  BOOST_TEST(step_of_replica_1({1, 1}).get() == 2);
  BOOST_TEST(w() == (std::vector<float>{8, 17}));
  // Back to m: a step waits for both again, and takes the average of both.
  s0.run({{r0.train.aggregate, Tensor::scalar<int64_t>(0)}}, {}, {r0.train.set_aggregate});
  auto again = step_of_replica_1({1, 1});
  BOOST_TEST((again.wait_for(500ms) == std::future_status::timeout));
  BOOST_TEST(s0.run({{r0.x, Tensor::from_vector<float>({3, 3})}}, {r0.train.next_step}, {r0.train.op})[0]
                 .scalar_value<int64_t>() == 3);
  BOOST_TEST(again.get() == 3);
  BOOST_TEST(w() == (std::vector<float>{6, 15}));
}

// The end of a synchronous job: the other replicas finish the last global step and leave, while
// the chief, which read the global step before that step was applied, starts one more. Its
// supervisor must not take the leavers for lost replicas and lower m (the chief's step would then
// apply alone, one past the end: ps_recovery's "1501 global steps"); it lets that step go on
// without applying.
BOOST_AUTO_TEST_CASE(replicas_that_leave_after_the_last_global_step_are_not_lost_and_a_late_step_does_not_apply_alone) {
  PsAndWorkers cluster;
  Replica r0(0, 2, 2), r1(1, 2, 2);
  Session s0(r0.root, cluster.on_worker(0)), s1(r1.root, cluster.on_worker(1));
  s0.run({}, {}, {ops::global_variables_initializer(r0.root)});
  auto w = [&] { return s0.run({r0.w})[0].to_vector<float>(); };
  // Global step 0 -> 1, the last: both gradients (x = 1, 1) averaged.
  auto last = std::async(std::launch::async, [&] {
    return s1.run({{r1.x, Tensor::from_vector<float>({1, 1})}}, {r1.train.next_step}, {r1.train.op})[0]
        .scalar_value<int64_t>();
  });
  BOOST_TEST(s0.run({{r0.x, Tensor::from_vector<float>({1, 1})}}, {r0.train.next_step}, {r0.train.op})[0]
                 .scalar_value<int64_t>() == 1);
  BOOST_TEST(last.get() == 1);
  BOOST_TEST(w() == (std::vector<float>{9, 19}));

  std::mutex mutex;
  std::vector<std::string> told;
  SupervisorOptions options;
  options.sync = SupervisorOptions::SyncReplicas{.tasks = {"worker:0", "worker:1"},
                                                 .replicas_to_aggregate = 2,
                                                 .aggregate = r0.train.aggregate,
                                                 .set_aggregate = r0.train.set_aggregate,
                                                 .global_step = r0.step.value,
                                                 .last_step = 1,
                                                 .stop = r0.train.stop};
  options.on_replicas = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    told.push_back(line);
  };
  // The end needs the global step to read and the stop to run.
  SupervisorOptions without_stop = options;
  without_stop.sync->stop = nullptr;
  BOOST_TEST(contains(error_of([&] { Supervisor(s0, nullptr, without_stop); }, ErrorCode::invalid_argument),
                      "last step (1) needs the global step and the SyncTrainOp's stop"));
  Supervisor supervisor(s0, nullptr, options);
  cluster.node("worker:1").signal(SIGKILL);  // replica 1 is done and its process goes
  RunOptions bounded;
  bounded.timeout = 30s;  // a backstop: the supervisor acts within its 250 ms poll
  BOOST_TEST(s0.run({{r0.x, Tensor::from_vector<float>({5, 5})}}, {r0.train.next_step}, {r0.train.op}, bounded)[0]
                 .scalar_value<int64_t>() == 1);
  BOOST_TEST(w() == (std::vector<float>{9, 19}), "the late step applied its gradient alone");
  BOOST_TEST(s0.run({r0.step.value})[0].scalar_value<int64_t>() == 1);
  std::lock_guard<std::mutex> lock(mutex);
  BOOST_TEST(told.empty(), (told.empty() ? std::string() : told.front()));
}
