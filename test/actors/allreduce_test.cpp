// Ring all-reduce (actors/cluster/allreduce.hpp) among 2, 3 and 4 processes on 127.0.0.1
// (allreduce_worker, started and stopped by pid): tensors whose sizes do not divide by the
// number of workers, float32, float64, int32 and int64, fused and alone, in many chunks; float32
// with float16 on the wire; every worker holds the same bits, and its sums are the sequential
// reference (integers exactly). A worker that vanishes fails the others naming it.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <memory>
#include <set>

#include "actors/cluster/cluster_spec.hpp"
#include "core/error.hpp"
#include "test/support/child_process.hpp"
#include "test/support/scratch_dir.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using troupe::testing::ChildProcess;

namespace {

struct Ring {
  troupe::testing::ScratchDir dir;
  std::vector<std::unique_ptr<ChildProcess>> workers;
  Ring(int n, const std::string& what) {
    const std::string spec = dir.file("cluster.json");
    std::ofstream(spec) << local_cluster_json({{"worker", n}});
    for (int k = 0; k < n; ++k)
      workers.push_back(std::make_unique<ChildProcess>(
          std::vector<std::string>{TROUPE_ALLREDUCE_WORKER, spec, fmt::format("worker:{}", k), what},
          dir.file(fmt::format("{}.out", k)), dir.file(fmt::format("{}.err", k))));
  }
  ~Ring() {
    for (auto& w : workers) w->signal(SIGKILL);
  }
  // Every worker's exit code and output, once all have exited (bounded).
  std::string outputs() {
    std::string all;
    for (std::size_t k = 0; k < workers.size(); ++k)
      all += fmt::format("worker:{}: {}{}\n", k, workers[k]->out(), workers[k]->err());
    return all;
  }
};

void check_sums(int n, const std::string& what) {
  Ring ring(n, what);
  std::set<std::string> hashes;
  for (auto& w : ring.workers) {
    auto code = w->wait_exit(120s);
    BOOST_TEST_REQUIRE(code.has_value(), "a worker did not finish within 120 s\n" << ring.outputs());
    BOOST_TEST_REQUIRE(*code == 0, ring.outputs());
    auto out = w->out();
    BOOST_TEST_REQUIRE(out.rfind("hash ", 0) == 0, ring.outputs());
    hashes.insert(out.substr(0, out.find(' ', 5)));
  }
  BOOST_TEST(hashes.size() == 1u, "the workers' results differ\n" << ring.outputs());
}

}  // namespace

BOOST_AUTO_TEST_CASE(two_three_and_four_workers_hold_the_same_exact_sums_of_every_dtype) {
  for (int n : {2, 3, 4}) {
    BOOST_TEST_CONTEXT(n << " workers") { check_sums(n, "sums"); }
  }
}

BOOST_AUTO_TEST_CASE(float16_on_the_wire_gives_every_worker_the_same_bits_within_its_bound) {
  for (int n : {2, 3, 4}) {
    BOOST_TEST_CONTEXT(n << " workers") { check_sums(n, "float16"); }
  }
}

BOOST_AUTO_TEST_CASE(a_worker_that_vanishes_fails_the_others_naming_it) {
  Ring ring(3, "vanish");
  for (int k = 0; k < 3; ++k) {
    auto code = ring.workers[std::size_t(k)]->wait_exit(90s);
    BOOST_TEST_REQUIRE(code.has_value(), "worker:" << k << " did not finish within 90 s\n" << ring.outputs());
    BOOST_TEST(*code == 0, ring.outputs());
  }
  // Its neighbours name it: worker:1 sends to it, worker:0 receives from it.
  BOOST_TEST(ring.workers[0]->out().find("worker:2 at 127.0.0.1:") != std::string::npos, ring.outputs());
  BOOST_TEST(ring.workers[1]->out().find("worker:2 at 127.0.0.1:") != std::string::npos, ring.outputs());
}
