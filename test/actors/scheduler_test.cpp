// SchedulingPolicy (actors/scheduler.hpp) on an actor system of its own with one or two workers:
// the jobs a worker wakes run newest first on it, an idle worker takes the oldest job of a busy
// one, and the lone job queued behind a long-running one, and no job is lost or run twice.
// An actor that blocks its worker stands in for a long kernel; every wait is bounded, and a
// wait that runs out fails the test instead of hanging it.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <vector>

#include "actors/scheduler.hpp"

using namespace troupe;
using namespace std::chrono_literals;

namespace {

// Far longer than any of these jobs takes on a loaded machine; reached only when a job that
// should have run never does.
constexpr auto kBound = 30s;

struct Pool {
  explicit Pool(int workers) {
    config.set("scheduler.max-threads", workers);
    config.set("logger.verbosity", caf::atom("quiet"));
    config.module_factories.push_back(make_scheduler);
    system = std::make_unique<caf::actor_system>(config);
  }
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;  // its destructor waits for every actor to finish
};

// The order in which jobs ran, by the index each was given.
struct Order {
  std::mutex mutex;
  std::vector<int> ran;
  void record(int i) {
    std::lock_guard<std::mutex> lock(mutex);
    ran.push_back(i);
  }
  std::vector<int> get() {
    std::lock_guard<std::mutex> lock(mutex);
    return ran;
  }
};

bool ready(std::future<void>& f, std::chrono::seconds bound = kBound) {
  return f.wait_for(bound) == std::future_status::ready;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_worker_runs_the_jobs_it_woke_newest_first) {
  Order order;
  std::promise<void> all_ran;
  {
    Pool pool(1);
    pool.system->spawn([&](caf::event_based_actor* self) {
      // Each spawn from inside an actor queues the new actor on this worker.
      for (int i = 0; i < 4; ++i)
        self->spawn([&, i] {
          order.record(i);
          if (i == 0) all_ran.set_value();
        });
    });
    auto f = all_ran.get_future();
    BOOST_REQUIRE_MESSAGE(ready(f), "the spawned jobs did not all run");
  }
  BOOST_TEST(order.get() == (std::vector<int>{3, 2, 1, 0}), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(the_lone_job_behind_a_long_running_one_is_taken_by_the_idle_worker) {
  std::promise<void> child_ran, parent_done;
  std::atomic<bool> ran_while_parent_busy{false};
  Pool pool(2);
  pool.system->spawn([&](caf::event_based_actor* self) {
    // The child is the only job queued on this worker, which stays busy until the child has run:
    // only the other worker can run it.
    self->spawn([&] { child_ran.set_value(); });
    auto f = child_ran.get_future();
    ran_while_parent_busy = ready(f);
    parent_done.set_value();
  });
  auto done = parent_done.get_future();
  BOOST_REQUIRE_MESSAGE(ready(done, 2 * kBound), "the long-running job never finished");
  BOOST_TEST(ran_while_parent_busy.load(), "the job queued behind a busy worker waited for it");
}

BOOST_AUTO_TEST_CASE(an_idle_worker_takes_the_oldest_job_of_a_busy_one_first) {
  Order order;
  std::promise<void> both_ran, parent_done;
  std::atomic<int> count{0};
  std::atomic<bool> ran_while_parent_busy{false};
  Pool pool(2);
  pool.system->spawn([&](caf::event_based_actor* self) {
    for (int i = 0; i < 2; ++i)
      self->spawn([&, i] {
        order.record(i);
        if (++count == 2) both_ran.set_value();
      });
    auto f = both_ran.get_future();
    ran_while_parent_busy = ready(f);
    parent_done.set_value();
  });
  auto done = parent_done.get_future();
  BOOST_REQUIRE_MESSAGE(ready(done, 2 * kBound), "the long-running job never finished");
  BOOST_TEST(ran_while_parent_busy.load(), "the jobs queued behind a busy worker waited for it");
  // The owner would have run job 1 first (newest first); the thief takes from the other end.
  BOOST_TEST(order.get() == (std::vector<int>{0, 1}), boost::test_tools::per_element());
}

namespace {

// A tree of actors, each spawning kFanOut children down to kDepth: thousands of spawns from
// both workers at once, with steals in both directions.
struct Tree {
  static constexpr int kFanOut = 8, kDepth = 4;
  static constexpr int kNodes = 1 + 8 + 64 + 512 + 4096;
  std::vector<std::atomic<int>> runs = std::vector<std::atomic<int>>(kNodes);
  std::atomic<int> finished{0};
  std::promise<void> all_ran;

  void grow(caf::event_based_actor* self, int id, int depth) {
    runs[std::size_t(id)].fetch_add(1);
    if (depth < kDepth)
      for (int k = 0; k < kFanOut; ++k) {
        int child = id * kFanOut + k + 1;
        self->spawn([this, child, depth](caf::event_based_actor* s) { grow(s, child, depth + 1); });
      }
    if (finished.fetch_add(1) + 1 == kNodes) all_ran.set_value();
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(under_many_spawns_every_job_runs_exactly_once) {
  Tree tree;
  {
    Pool pool(2);
    pool.system->spawn([&](caf::event_based_actor* self) { tree.grow(self, 0, 0); });
    auto f = tree.all_ran.get_future();
    BOOST_REQUIRE_MESSAGE(ready(f, 2 * kBound), tree.finished.load() << " of " << Tree::kNodes << " jobs ran");
  }  // every actor has finished here, so a job run twice would show in its count
  int wrong = 0;
  for (auto& r : tree.runs) wrong += r.load() != 1;
  BOOST_TEST(wrong == 0);
  BOOST_TEST(tree.finished.load() == Tree::kNodes);
}
