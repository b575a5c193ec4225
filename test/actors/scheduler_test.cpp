// SchedulingPolicy (actors/scheduler.hpp) on an actor system of its own with one or two workers:
// the jobs a worker wakes run newest first on it, an idle worker takes the oldest job of a busy
// one, and the lone job queued behind a long-running one, but never a job sent to the busy one
// in particular, and no job is lost or run twice.
// An actor that blocks its worker stands in for a long kernel; every wait is bounded, and a
// wait that runs out fails the test instead of hanging it.
#include <boost/test/unit_test.hpp>

#include <atomic>
#include <chrono>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
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

// A job that records the thread it ran on.
class Recorded final : public caf::resumable {
 public:
  explicit Recorded(std::promise<std::thread::id>& ran) : ran_(ran) {}
  subtype_t subtype() const override { return unspecified; }
  resume_result resume(caf::execution_unit*, std::size_t) override {
    ran_.set_value(std::this_thread::get_id());
    return done;
  }
  void intrusive_ptr_add_ref_impl() override { refs_.fetch_add(1); }
  void intrusive_ptr_release_impl() override {
    if (refs_.fetch_sub(1) == 1) delete this;
  }

 private:
  std::promise<std::thread::id>& ran_;
  std::atomic<int> refs_{1};  // the job's
};

}  // namespace

// A job handed to one worker in particular (a spread loop's node sent to its iteration's
// worker) is that worker's: the idle worker does not take it, however long it waits behind the
// busy one's job (a thief could only send it back).
BOOST_AUTO_TEST_CASE(a_job_sent_to_a_busy_worker_waits_for_it_and_is_not_taken_by_the_idle_one) {
  std::promise<std::thread::id> first, second;
  auto first_ran = first.get_future(), second_ran = second.get_future();
  std::promise<void> parent_done;
  std::atomic<bool> ran_while_parent_busy{false};
  std::thread::id parent_thread;
  Pool pool(2);
  pool.system->spawn([&](caf::event_based_actor* self) {
    parent_thread = std::this_thread::get_id();
    caf::execution_unit* unit = self->context();
    const std::size_t here = SchedulingPolicy::worker_index(unit);
    // Two jobs: the idle worker takes from a queue of two at once, and the lone job once it has
    // waited behind this one for a while; neither may it take here.
    SchedulingPolicy::send_to(unit, here, new Recorded(first));
    SchedulingPolicy::send_to(unit, here, new Recorded(second));
    ran_while_parent_busy = first_ran.wait_for(500ms) == std::future_status::ready;
    parent_done.set_value();
  });
  auto done = parent_done.get_future();
  BOOST_REQUIRE_MESSAGE(ready(done, 2 * kBound), "the long-running job never finished");
  BOOST_TEST(!ran_while_parent_busy.load(), "a job sent to the busy worker ran elsewhere meanwhile");
  BOOST_REQUIRE_MESSAGE(first_ran.wait_for(kBound) == std::future_status::ready, "the first job sent never ran");
  BOOST_REQUIRE_MESSAGE(second_ran.wait_for(kBound) == std::future_status::ready, "the second job sent never ran");
  BOOST_TEST((first_ran.get() == parent_thread), "the first job ran on another worker");
  BOOST_TEST((second_ran.get() == parent_thread), "the second job ran on another worker");
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
