// troupe-node processes on 127.0.0.1 (ports checked free): a node publishes its worker on its
// task's address and says who it is; a second node on a busy port, a task the spec lacks and a
// misspelt spec are refused with their errors; SIGTERM stops a node cleanly, and a node started
// again is a new incarnation; a session refuses nodes started from specs that differ. Every process is stopped by its pid, also when a check fails.
#include <boost/test/unit_test.hpp>

#include <caf/io/all.hpp>

#include <cstdlib>
#include <fstream>
#include <iterator>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/member.hpp"
#include "actors/runtime.hpp"
#include "actors/session.hpp"
#include "ops/all.hpp"
#include "test/support/child_process.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/free_port.hpp"
#include "test/support/scratch_dir.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using troupe::testing::ChildProcess;
using troupe::testing::contains;
using troupe::testing::error_of;
using troupe::testing::free_port;

namespace {

struct Cluster {
  troupe::testing::ScratchDir dir;
  std::vector<uint16_t> picked = free_loopback_ports(2);  // at once: two distinct ports
  uint16_t worker_port = picked[0];
  uint16_t ps_port = picked[1];
  std::string spec = dir.file("cluster.json");
  Cluster() {
    std::ofstream(spec) << "{\"cluster\": {\"worker\": [\"127.0.0.1:" << worker_port << "\"], \"ps\": [\"127.0.0.1:"
                        << ps_port << "\"]}}";
  }
  std::unique_ptr<ChildProcess> node(const std::string& task, const std::string& name) const {
    return std::make_unique<ChildProcess>(
        std::vector<std::string>{TROUPE_NODE_BINARY, "--cluster", spec, "--task", task, "--threads", "1"},
        dir.file(name + ".out"), dir.file(name + ".err"));
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_node_publishes_its_worker_says_who_it_is_and_stops_on_sigterm) {
  Cluster c;
  auto node = c.node("worker:0", "first");
  if (!node->wait_for_output("started on 127.0.0.1:" + std::to_string(c.worker_port), 30s))
    BOOST_FAIL("out: " << node->out() << " err: " << node->err() << node->state());

  // It runs with OpenMP's spinning bounded (devices/cpu_threads.hpp: bound_openmp_spinning
  // executes the program again with GOMP_SPINCOUNT set, unless the environment sets it).
  if (!std::getenv("GOMP_SPINCOUNT") && !std::getenv("OMP_WAIT_POLICY")) {
    std::ifstream environ("/proc/" + std::to_string(node->pid()) + "/environ");
    std::string all((std::istreambuf_iterator<char>(environ)), std::istreambuf_iterator<char>());
    BOOST_TEST(all.find(std::string("GOMP_SPINCOUNT=10000") + '\0') != std::string::npos);
  }

  TaskAddress address{"127.0.0.1", c.worker_port};
  MemberIdentity who = identify_member(address, 10s);
  BOOST_TEST(who.task == "worker:0");
  BOOST_TEST(contains(node->out(), fmt::format("(incarnation {:#x},", who.incarnation)), node->out());
  BOOST_TEST(contains(who.devices, "/job:worker/task:0/device:CPU:0"), who.devices);

  // The port is taken: a second node for the task says so, and by whom, and exits 1.
  auto second = c.node("worker:0", "second");
  BOOST_TEST_REQUIRE(second->wait_exit(30s).value_or(-1) == 1, second->err());
  BOOST_TEST(contains(second->err(), "task worker:0 cannot listen on 127.0.0.1:" + std::to_string(c.worker_port) +
                                         ": the address is in use, by pid " + std::to_string(node->pid()) +
                                         " (" + TROUPE_NODE_BINARY),
             second->err());

  node->signal(SIGTERM);
  BOOST_TEST_REQUIRE(node->wait_exit(30s).value_or(-1) == 0, node->out() << node->err());
  BOOST_TEST(contains(node->out(), "worker:0: stopping on SIGTERM"), node->out());
  BOOST_TEST(contains(node->out(), "worker:0: stopped"), node->out());
  auto gone = error_of([&] { identify_member(address, 5s); }, ErrorCode::unavailable);
  BOOST_TEST(contains(gone, "127.0.0.1:" + std::to_string(c.worker_port)), gone);

  // Started again, the task is a new incarnation.
  auto again = c.node("worker:0", "again");
  if (!again->wait_for_output("started on", 30s)) BOOST_FAIL(again->err() << again->state());
  MemberIdentity now = identify_member(address, 10s);
  BOOST_TEST(now.task == "worker:0");
  BOOST_TEST(now.incarnation != who.incarnation);
  again->signal(SIGINT);
  BOOST_TEST(again->wait_exit(30s).value_or(-1) == 0);
}

BOOST_AUTO_TEST_CASE(an_actor_published_with_another_contract_than_the_worker_is_refused_naming_its_address) {
  auto runtime = Runtime::get_networked(1, NetworkOptions{});
  caf::actor_system& system = runtime->system();
  caf::actor other = system.spawn([](caf::event_based_actor*) -> caf::behavior {
    return {[](identify_atom) { return std::string("not a member"); }};
  });
  auto port = system.middleman().publish(other, 0, "127.0.0.1", true);
  if (!port) BOOST_FAIL(system.render(port.error()));
  const TaskAddress address{"127.0.0.1", *port};
  auto refused = error_of([&] { identify_member(address, 10s); }, ErrorCode::failed_precondition);
  BOOST_TEST(contains(refused, "published at 127.0.0.1:" + std::to_string(*port) + " is no Troupe cluster member"),
             refused);
  system.middleman().unpublish(other, *port);
  caf::anon_send_exit(other, caf::exit_reason::user_shutdown);
}

BOOST_AUTO_TEST_CASE(a_task_the_spec_lacks_or_a_misspelt_spec_is_refused_with_exit_code_2) {
  Cluster c;
  auto lacking = c.node("ps:3", "lacking");
  BOOST_TEST_REQUIRE(lacking->wait_exit(30s).value_or(-1) == 2, lacking->err());
  BOOST_TEST(contains(lacking->err(), "task ps:3: job 'ps' has no task 3 (its tasks: 0)"), lacking->err());

  const std::string typo = c.dir.file("typo.json");
  std::ofstream(typo) << "{\"clustr\": {\"worker\": [\"127.0.0.1:1\"]}}";
  ChildProcess bad({TROUPE_NODE_BINARY, "--cluster", typo, "--task", "worker:0"}, c.dir.file("bad.out"),
                   c.dir.file("bad.err"));
  BOOST_TEST_REQUIRE(bad.wait_exit(30s).value_or(-1) == 2, bad.err());
  BOOST_TEST(contains(bad.err(), "unknown key 'clustr'"), bad.err());
}

BOOST_AUTO_TEST_CASE(hosts_whose_specs_differ_are_refused_at_once_naming_both_tasks_and_the_first_difference) {
  Cluster c;
  // ps:0 was given a spec with a worker:1 the others do not have.
  const std::string other = c.dir.file("other.json");
  std::ofstream(other) << "{\"cluster\": {\"worker\": [\"127.0.0.1:" << c.worker_port << "\", \"127.0.0.1:"
                       << free_port() << "\"], \"ps\": [\"127.0.0.1:" << c.ps_port << "\"]}}";
  auto worker = c.node("worker:0", "worker");
  ChildProcess ps({TROUPE_NODE_BINARY, "--cluster", other, "--task", "ps:0", "--threads", "1"}, c.dir.file("ps.out"),
                  c.dir.file("ps.err"));
  BOOST_TEST_REQUIRE(worker->wait_for_output("started on", 30s), worker->err());
  BOOST_TEST_REQUIRE(ps.wait_for_output("started on", 30s), ps.err());
  auto root = Scope::root();
  ops::constant(root, 1.0f);
  SessionOptions options;
  options.target = fmt::format("troupe://127.0.0.1:{}", c.worker_port);
  options.cluster_startup_timeout = 60s;
  const auto start = std::chrono::steady_clock::now();
  auto e = error_of([&] { Session session(root, options); }, ErrorCode::failed_precondition);
  const bool at_once = std::chrono::steady_clock::now() - start < 20s;
  BOOST_TEST(at_once, "a disagreement was retried until the startup bound");
  BOOST_TEST(contains(e, fmt::format("task ps:0 at 127.0.0.1:{}: its cluster spec differs from that of worker:0 (this "
                                     "session's target): worker:1 at 127.0.0.1:",
                                     c.ps_port)),
             e);
  BOOST_TEST(contains(e, "is only in ps:0's spec"), e);
}
