// Core leases of the CPU device: teams never overlap each other or single-core work when a team
// is as wide as the budget, single-core work stays within the budget, and a team kernel runs
// with the intra-op thread count and passes its exceptions back.
#include <boost/test/unit_test.hpp>

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "devices/cpu_threads.hpp"

using namespace troupe;

namespace {

struct Occupancy {
  std::atomic<int> teams{0}, singles{0}, max_teams{0}, max_singles{0}, overlaps{0};
  static void raise(std::atomic<int>& max, int now) {
    int m = max.load();
    while (now > m && !max.compare_exchange_weak(m, now)) {
    }
  }
  void busy() {
    for (int i = 0; i < 200; ++i) std::this_thread::yield();
  }
  // `threads` threads each running `team_times` team kernels, and `singles` threads each leasing
  // a single core `single_times` times, all at once; every one counts itself while it holds its
  // cores.
  void run(int threads, int team_times, int singles, int single_times) {
    std::vector<std::thread> all;
    for (int t = 0; t < threads; ++t)
      all.emplace_back([&] {
        for (int i = 0; i < team_times; ++i)
          run_as_team([&] {
            raise(max_teams, ++teams);
            if (this->singles.load() > 0) ++overlaps;
            busy();
            --teams;
          });
      });
    for (int t = 0; t < singles; ++t)
      all.emplace_back([&] {
        for (int i = 0; i < single_times; ++i) {
          CoreLease lease(1);
          raise(max_singles, ++this->singles);
          if (teams.load() > 0) ++overlaps;
          busy();
          --this->singles;
        }
      });
    for (auto& t : all) t.join();
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(teams_as_wide_as_the_budget_take_turns_with_everything_else) {
  set_intra_op_threads(2, 2);
  Occupancy o;
  o.run(/*threads=*/4, /*team_times=*/50, /*singles=*/4, /*single_times=*/50);
  BOOST_TEST(o.max_teams.load() == 1);
  BOOST_TEST(o.max_singles.load() <= 2);
  BOOST_TEST(o.overlaps.load() == 0);
}

// As many threads leasing single cores as the budget has: each marks its lease on its own seat
// while no team is about, and gives way to the teams all the same (a team raises the count and
// waits for the seats; a seat marked meanwhile sees it and counts its lease instead). Then one
// thread more than the budget: every lease counted again, the singles never over the budget.
BOOST_AUTO_TEST_CASE(single_cores_leased_on_their_own_seats_still_give_way_to_teams_and_keep_the_budget) {
  set_intra_op_threads(2, 2);
  for (int singles : {2, 3}) {
    Occupancy o;
    o.run(/*threads=*/2, /*team_times=*/200, singles, /*single_times=*/2000);
    BOOST_TEST(o.max_teams.load() == 1);
    BOOST_TEST(o.max_singles.load() <= 2);
    BOOST_TEST(o.overlaps.load() == 0);
  }
  // The threads are gone, their seats free: a lease and a team still go.
  { CoreLease lease(1); }
  bool ran = false;
  run_as_team([&] { ran = true; });
  BOOST_TEST(ran);
}

BOOST_AUTO_TEST_CASE(narrower_teams_share_the_budget) {
  set_intra_op_threads(1, 3);
  Occupancy o;
  std::vector<std::thread> threads;
  for (int t = 0; t < 6; ++t)
    threads.emplace_back([&] {
      for (int i = 0; i < 50; ++i)
        run_as_team([&] {
          Occupancy::raise(o.max_teams, ++o.teams);
          o.busy();
          --o.teams;
        });
    });
  for (auto& t : threads) t.join();
  BOOST_TEST(o.max_teams.load() <= 3);
  set_intra_op_threads(2, 2);
}

BOOST_AUTO_TEST_CASE(a_team_kernel_runs_with_the_intra_op_threads_and_rethrows_its_error) {
  set_intra_op_threads(2, 2);
  int threads = 0;
  run_as_team([&] { threads = omp_get_max_threads(); });
  BOOST_TEST(threads == 2);
  BOOST_CHECK_THROW(run_as_team([] { throw std::runtime_error("kernel failed"); }), std::runtime_error);
  // The lease was returned: another team still runs.
  bool ran = false;
  run_as_team([&] { ran = true; });
  BOOST_TEST(ran);
}
