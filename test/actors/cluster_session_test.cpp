// Sessions whose target is a cluster of troupe-node processes on 127.0.0.1 (worker:0, worker:1,
// ps:0 on ports checked free): a graph over the three gives the local session's values (the
// troupe-cluster-demo program: matmuls, a loop and a cond spanning tasks, gradients and an
// update of a ps variable), a large tensor crosses in chunks, float16 transfer stays within its
// bound, a killed or stopped worker fails the step naming it, later steps fail fast, and a
// restarted worker is used again. Every process is stopped by its pid, also when a check fails.
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <cmath>
#include <fstream>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <sstream>
#include <thread>
#include <tuple>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "ops/state/replica_device_setter.hpp"
#include "test/support/child_process.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/free_port.hpp"
#include "test/support/listening_ports.hpp"
#include "test/support/scratch_dir.hpp"
#include "test/support/skip.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using troupe::testing::ChildProcess;
using troupe::testing::contains;
using troupe::testing::error_of;
using troupe::testing::free_port;

namespace {

struct Cluster {
  troupe::testing::ScratchDir dir;
  std::vector<uint16_t> picked = free_loopback_ports(3);  // at once: three distinct ports
  std::map<std::string, uint16_t> ports{{"worker:0", picked[0]}, {"worker:1", picked[1]}, {"ps:0", picked[2]}};
  std::string spec = dir.file("cluster.json");
  std::map<std::string, std::unique_ptr<ChildProcess>> nodes;
  int starts = 0;

  Cluster() {
    std::ofstream(spec) << fmt::format(
        "{{\"cluster\": {{\"worker\": [\"127.0.0.1:{}\", \"127.0.0.1:{}\"], \"ps\": [\"127.0.0.1:{}\"]}}}}",
        ports["worker:0"], ports["worker:1"], ports["ps:0"]);
    for (auto& [task, port] : ports) start(task);
  }
  ~Cluster() {
    for (auto& [task, node] : nodes) {
      node->signal(SIGCONT);
      node->signal(SIGKILL);
    }
  }
  void start(const std::string& task) {
    auto node = std::make_unique<ChildProcess>(
        std::vector<std::string>{TROUPE_NODE_BINARY, "--cluster", spec, "--task", task, "--threads", "1"},
        dir.file(fmt::format("{}-{}.out", task, starts)), dir.file(fmt::format("{}-{}.err", task, starts)));
    ++starts;
    if (!node->wait_for_output("started on", 30s))
      BOOST_FAIL(task << " did not start: " << node->out() << node->err() << node->state());
    nodes[task] = std::move(node);
  }
  std::string target() { return fmt::format("troupe://127.0.0.1:{}", ports["worker:0"]); }
  std::string address(const std::string& task) { return fmt::format("127.0.0.1:{}", ports[task]); }
  std::string logs() {
    std::string all;
    for (auto& [task, node] : nodes) all += node->out() + node->err();
    return all;
  }
};

// x on worker:0, squared on worker:1 ('far'), added to x back on worker:0.
struct ThereAndBack {
  Scope root = Scope::root();
  Output x = ops::placeholder(root.with_device("/job:worker/task:0").with_op_name("x"), DType::float32, {4});
  Output far = ops::square(root.with_device("/job:worker/task:1").with_op_name("far"), x);
  Output y = ops::add(root.with_device("/job:worker/task:0"), far, x);
  FeedList feeds = {{x, Tensor::from_vector<float>({1, 2, 3, 4})}};
  std::vector<float> expected = {2, 6, 12, 20};
};

SessionOptions on(Cluster& c) {
  SessionOptions options;
  options.target = c.target();
  return options;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_graph_over_two_workers_and_a_ps_gives_the_local_sessions_values) {
  Cluster c;
  ChildProcess demo({TROUPE_CLUSTER_DEMO_BINARY, "--target", c.target(), "--steps", "3"}, c.dir.file("demo.out"),
                    c.dir.file("demo.err"));
  BOOST_TEST_REQUIRE(demo.wait_exit(120s).value_or(-1) == 0, demo.out() << demo.err() << c.logs());
  BOOST_TEST(contains(demo.out(), "and the local session agree"), demo.out());
  // Each task logged its partitions and its peers.
  const std::string logs = c.logs();
  BOOST_TEST(contains(logs, "ps:0: partition registered: graph"), logs);
  BOOST_TEST(contains(logs, "worker:0: peer connected: worker:1 at " + c.address("worker:1")), logs);
  BOOST_TEST(contains(logs, "ps:0: peer connected: session of "), logs);
  BOOST_TEST(contains(logs, "ps:0: peer lost: session of "), logs);  // the demo ended
}

BOOST_AUTO_TEST_CASE(variables_on_the_ps_keep_their_values_across_steps_and_sessions) {
  Cluster c;
  auto root = Scope::root();
  auto ps = root.with_device("/job:ps/task:0");
  auto v = ops::variable(ps.with_op_name("counter"), {2}, DType::float32);
  auto init = ops::assign(ps, v, ops::constant<float>(ps, {1.0f, 2.0f}, {2}));
  auto bump = ops::assign_add(root.with_device("/job:worker/task:1"), v, ops::constant<float>(root, {10.0f, 20.0f}, {2}));
  {
    Session session(root, on(c));
    session.run({}, {}, {init.node()});
    session.run({}, {}, {bump.node()});
    session.run({}, {}, {bump.node()});
  }
  Session later(root, on(c));  // the ps process still holds it
  auto value = later.run({v})[0].to_vector<float>();
  BOOST_TEST(value == (std::vector<float>{21.0f, 42.0f}), "counter: " << value[0] << ", " << value[1]);
}

BOOST_AUTO_TEST_CASE(a_tensor_larger_than_the_window_crosses_in_chunks_and_arrives_whole) {
  Cluster c;
  auto root = Scope::root();
  const int64_t n = int64_t(24) << 20;  // 96 MiB of float32: 24 chunks, more than the 64 MiB window
  auto x = ops::placeholder(root.with_device("/job:worker/task:0").with_op_name("x"), DType::float32, {n});
  auto y = ops::add(root.with_device("/job:worker/task:1"), x, ops::constant(root.with_device("/job:worker/task:1"), 1.0f));
  auto back = ops::mul(root.with_device("/job:worker/task:0"), y, ops::constant(root.with_device("/job:worker/task:0"), 2.0f));
  Session session(root, on(c));
  Tensor input(DType::float32, Shape{n});
  float* in = input.data<float>();
  for (int64_t i = 0; i < n; ++i) in[i] = float(i % 1000003);
  auto out = session.run({{x, input}}, {back})[0];
  BOOST_TEST_REQUIRE(out.num_elements() == n);
  const float* o = out.data<float>();
  int64_t wrong = 0;
  for (int64_t i = 0; i < n; ++i) wrong += o[i] != (in[i] + 1.0f) * 2.0f;
  BOOST_TEST(wrong == 0);
}

BOOST_AUTO_TEST_CASE(float16_transfer_rounds_values_between_tasks_within_its_bound) {
  Cluster c;
  auto root = Scope::root();
  auto w0 = root.with_device("/job:worker/task:0");
  auto w1 = root.with_device("/job:worker/task:1");
  auto x = ops::placeholder(w0.with_op_name("x"), DType::float32, {1000});
  auto exact = ops::identity(w0, x);
  auto lossy = ops::identity(w0.with_float16_transfer(), x);
  auto exact_there = ops::identity(w1, exact);
  auto lossy_there = ops::identity(w1, lossy);
  std::vector<float> values(1000);
  for (int i = 0; i < 1000; ++i) values[std::size_t(i)] = std::sin(float(i)) * float(1 + i);
  Session session(root, on(c));
  auto out = session.run({{x, Tensor::from_vector<float>(values)}}, {exact_there, lossy_there});
  BOOST_TEST(out[0].to_vector<float>() == values);
  auto half = out[1].to_vector<float>();
  int changed = 0;
  for (int i = 0; i < 1000; ++i) {
    const float v = values[std::size_t(i)];
    BOOST_TEST(std::abs(half[std::size_t(i)] - v) <= std::abs(v) / 2048.0f, "value " << v << " came as " << half[std::size_t(i)]);
    changed += half[std::size_t(i)] != v;
  }
  BOOST_TEST(changed > 500);  // float16 keeps 11 bits: most of these values lose some
  // Counted: worker:0 sent the lossy value as float16, saving 2 bytes per element.
  auto stats = session.transfer_stats();
  auto w0_stats = std::find_if(stats.begin(), stats.end(), [](const TaskTransfers& t) { return t.task == "worker:0"; });
  BOOST_TEST_REQUIRE((w0_stats != stats.end()));
  BOOST_TEST(w0_stats->float16_values == 1u);
  BOOST_TEST(w0_stats->float16_bytes_saved == 2000u);
  BOOST_TEST(w0_stats->bytes_sent == 4000u + 2000u);
  // Both went over worker:0's data connection to worker:1, not CAF's.
  BOOST_TEST(w0_stats->values_sent_direct == w0_stats->values_sent);

  // The session option does it for every edge between tasks.
  SessionOptions all = on(c);
  all.float16_transfer = true;
  Session everything(root, all);
  auto rounded = everything.run({{x, Tensor::from_vector<float>(values)}}, {exact_there})[0].to_vector<float>();
  BOOST_TEST(rounded == half);
}

BOOST_AUTO_TEST_CASE(a_killed_worker_fails_the_step_naming_its_task_and_works_again_once_restarted) {
  Cluster c;
  ThereAndBack g;
  Session session(g.root, on(c));
  BOOST_TEST(session.run(g.feeds, {g.y})[0].to_vector<float>() == g.expected);

  c.nodes["worker:1"]->signal(SIGKILL);
  BOOST_TEST_REQUIRE(c.nodes["worker:1"]->wait_exit(10s).has_value());
  RunOptions bounded;
  bounded.timeout = 20s;  // a backstop: the loss must be seen long before
  auto lost = error_of([&] { session.run(g.feeds, {g.y}, {}, bounded); }, ErrorCode::unavailable);
  BOOST_TEST(contains(lost, "worker:1 at " + c.address("worker:1")), lost);
  // The next step fails at once with the same cause while the task is away.
  auto still = error_of([&] { session.run(g.feeds, {g.y}, {}, bounded); }, ErrorCode::unavailable);
  BOOST_TEST(contains(still, "task worker:1 at " + c.address("worker:1") + " is unreachable"), still);

  c.start("worker:1");
  BOOST_TEST(session.run(g.feeds, {g.y})[0].to_vector<float>() == g.expected);
}

BOOST_AUTO_TEST_CASE(a_stopped_worker_fails_the_step_within_the_connection_timeout_naming_it) {
  Cluster c;
  ThereAndBack g;
  Session session(g.root, on(c));
  session.run(g.feeds, {g.y});
  BOOST_TEST_REQUIRE(c.nodes["worker:1"]->stop(5s), "worker:1 did not stop");
  RunOptions bounded;
  bounded.timeout = 20s;  // a backstop: the heartbeats must see the hang long before
  auto hung = error_of([&] { session.run(g.feeds, {g.y}, {}, bounded); }, ErrorCode::unavailable);
  // Seen first by the session ("task worker:1 at ... was lost") or by worker:0, which takes values
  // from it ("task worker:0 lost its connection to peer worker:1 at ..."): either names the task,
  // its address and what waited for it.
  BOOST_TEST(contains(hung, "worker:1 at " + c.address("worker:1")), hung);
  BOOST_TEST(contains(hung, "'far:0'"), hung);
}

BOOST_AUTO_TEST_CASE(a_target_nobody_listens_on_or_a_malformed_one_is_refused_naming_it) {
  auto root = Scope::root();
  ops::constant(root, 1.0f);
  SessionOptions nobody;
  const uint16_t port = free_port();
  nobody.target = fmt::format("troupe://127.0.0.1:{}", port);
  nobody.cluster_startup_timeout = 300ms;
  auto refused = error_of([&] { Session s(root, nobody); }, ErrorCode::unavailable);
  BOOST_TEST(contains(refused, fmt::format("127.0.0.1:{}", port)), refused);
  SessionOptions malformed;
  malformed.target = "grpc://127.0.0.1:2222";
  auto bad = error_of([&] { Session s(root, malformed); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(bad, "troupe://host:port"), bad);
}

BOOST_AUTO_TEST_CASE(an_error_on_another_task_fails_the_step_naming_the_node_and_carrying_its_device) {
  Cluster c;
  auto root = Scope::root();
  auto ps = root.with_device("/job:ps/task:0");
  auto v = ops::variable(ps.with_op_name("never_set"), {2}, DType::float32);
  auto y = ops::mul(root.with_device("/job:worker/task:1").with_op_name("use"), v, ops::constant(root, 2.0f));
  auto ok = ops::add(root.with_device("/job:worker/task:1"), ops::constant(root, 1.0f), ops::constant(root, 2.0f));
  Session session(root, on(c));
  auto message = error_of([&] { session.run({y}); }, ErrorCode::failed_precondition);
  BOOST_TEST(contains(message, "'never_set'"), message);
  BOOST_TEST(contains(message, "/job:ps/task:0/device:CPU:0"), message);
  BOOST_TEST(contains(message, "not initialised"), message);
  // The failed node's device crosses the cluster as data (what recovery reads), not only in words.
  try {
    session.run({y});
    BOOST_FAIL("the step did not fail");
  } catch (const Error& e) {
    BOOST_TEST(e.device() == "/job:ps/task:0/device:CPU:0");
  }
  // The session goes on.
  BOOST_TEST(session.run({ok})[0].scalar_value<float>() == 3.0f);
}

BOOST_AUTO_TEST_CASE(many_steps_in_a_row_and_at_once_all_finish_with_their_own_values) {
  // worker:1's share starts with a value from worker:0, which often comes before worker:1 is
  // asked to run its share of the step: the step must still finish.
  Cluster c;
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_device("/job:worker/task:0").with_op_name("x"), DType::float32, {});
  auto doubled = ops::mul(root.with_device("/job:worker/task:0"), x, ops::constant(root, 2.0f));
  auto y = ops::add(root.with_device("/job:worker/task:1"), doubled, ops::constant(root, 1.0f));
  Session session(root, on(c));
  RunOptions bounded;
  bounded.timeout = 20s;
  for (int i = 0; i < 300; ++i) {
    const float got = session.run({{x, Tensor::scalar<float>(float(i))}}, {y}, {}, bounded)[0].scalar_value<float>();
    BOOST_TEST_REQUIRE(got == 2.0f * float(i) + 1.0f, "step " << i);
  }
  std::vector<std::thread> threads;
  std::atomic<int> wrong{0};
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 50; ++i) {
        const float v = float(t * 1000 + i);
        try {
          if (session.run({{x, Tensor::scalar<float>(v)}}, {y}, {}, bounded)[0].scalar_value<float>() != 2.0f * v + 1.0f)
            ++wrong;
        } catch (const Error&) {
          ++wrong;
        }
      }
    });
  for (auto& t : threads) t.join();
  BOOST_TEST(wrong == 0);
}

namespace {

// The local port of `pid`'s established connection to 127.0.0.1:`port`, from `ss`; 0 if none.
int connection_of(pid_t pid, uint16_t port) {
  std::string command = fmt::format("ss -tnpH state established '( dport = :{} )' 2>/dev/null", port);
  std::unique_ptr<FILE, int (*)(FILE*)> out(::popen(command.c_str(), "r"), ::pclose);
  if (!out) return 0;
  char line[512];
  while (std::fgets(line, sizeof line, out.get())) {
    std::string l = line;
    if (l.find(fmt::format("pid={},", pid)) == std::string::npos) continue;
    std::istringstream fields(l);
    std::string recv_q, send_q, local;
    fields >> recv_q >> send_q >> local;
    return std::stoi(local.substr(local.rfind(':') + 1));
  }
  return 0;
}

// Why `ss -K` cannot cut one TCP connection here ("" when it can): it is tried on a loopback
// connection of this process's own, whose reading end must then see the reset.
std::string why_no_connection_can_be_cut() {
  const char* missing = "cannot cut one TCP connection here (ss -K needs iproute2 and CONFIG_INET_DIAG_DESTROY)";
  const int listener = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof a;
  if (listener < 0 || ::bind(listener, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 || ::listen(listener, 1) != 0 ||
      ::getsockname(listener, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    if (listener >= 0) ::close(listener);
    return "cannot make a loopback connection to try ss -K on";
  }
  const int client = ::socket(AF_INET, SOCK_STREAM, 0);
  const bool connected = client >= 0 && ::connect(client, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  const int server = connected ? ::accept(listener, nullptr, nullptr) : -1;
  std::string why = missing;
  if (server >= 0) {
    timeval bound{5, 0};
    ::setsockopt(client, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
    const int cut = std::system(fmt::format("ss -K state established '( dport = :{} )' >/dev/null 2>&1",
                                            ntohs(a.sin_port)).c_str());
    char byte;
    errno = 0;
    if (cut == 0 && ::recv(client, &byte, 1, 0) <= 0 && errno != EAGAIN && errno != EWOULDBLOCK) why.clear();
    ::close(server);
  }
  if (client >= 0) ::close(client);
  ::close(listener);
  return why;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_connection_lost_between_two_workers_fails_the_step_and_the_next_one_connects_again,
                     *troupe::testing::runs_here(why_no_connection_can_be_cut)) {
  Cluster c;
  ThereAndBack g;
  Session session(g.root, on(c));
  BOOST_TEST(session.run(g.feeds, {g.y})[0].to_vector<float>() == g.expected);
  // Cut worker:0's connection to worker:1 (ss -K: the kernel resets that socket alone), leaving
  // both connected to the session.
  const int local = connection_of(c.nodes["worker:0"]->pid(), c.ports["worker:1"]);
  BOOST_TEST_REQUIRE(local != 0, "worker:0 has no connection to worker:1");
  BOOST_TEST_REQUIRE(std::system(fmt::format("ss -K state established '( sport = :{} and dport = :{} )' >/dev/null 2>&1",
                                             local, c.ports["worker:1"])
                                     .c_str()) == 0);
  BOOST_TEST_REQUIRE(connection_of(c.nodes["worker:0"]->pid(), c.ports["worker:1"]) != local, "ss -K cut nothing");
  RunOptions bounded;
  bounded.timeout = 20s;  // a backstop: the loss must be seen long before
  auto lost = error_of([&] { session.run(g.feeds, {g.y}, {}, bounded); }, ErrorCode::unavailable);
  BOOST_TEST(contains(lost, "lost its connection to peer worker:"), lost);
  // The session registers the graph anew, and the workers connect again.
  BOOST_TEST(session.run(g.feeds, {g.y}, {}, bounded)[0].to_vector<float>() == g.expected);
}

BOOST_AUTO_TEST_CASE(a_data_connection_cut_between_two_workers_fails_the_step_and_the_next_one_connects_again,
                     *troupe::testing::runs_here(why_no_connection_can_be_cut)) {
  Cluster c;
  ThereAndBack g;
  Session session(g.root, on(c));
  BOOST_TEST(session.run(g.feeds, {g.y})[0].to_vector<float>() == g.expected);
  // worker:1's data listener: the port it listens on besides its task's.
  int data_port = 0;
  for (int port : troupe::testing::listening_ports_of(c.nodes["worker:1"]->pid()))
    if (port != c.ports["worker:1"]) data_port = port;
  BOOST_TEST_REQUIRE(data_port != 0, "worker:1 listens on no data port");
  const int local = connection_of(c.nodes["worker:0"]->pid(), uint16_t(data_port));
  BOOST_TEST_REQUIRE(local != 0, "worker:0 has no data connection to worker:1");
  const std::string cut =
      fmt::format("ss -K state established '( sport = :{} and dport = :{} )' >/dev/null 2>&1", local, data_port);
  BOOST_TEST_REQUIRE(std::system(cut.c_str()) == 0);
  RunOptions bounded;
  bounded.timeout = 20s;  // a backstop: the loss must be seen long before
  auto lost = error_of([&] { session.run(g.feeds, {g.y}, {}, bounded); }, ErrorCode::unavailable);
  BOOST_TEST(contains(lost, "lost its connection to peer worker:"), lost);
  BOOST_TEST(contains(lost, "data connection"), lost);
  // The session registers the graph anew, and the workers connect again, the data path too.
  BOOST_TEST(session.run(g.feeds, {g.y}, {}, bounded)[0].to_vector<float>() == g.expected);
  BOOST_TEST(connection_of(c.nodes["worker:0"]->pid(), uint16_t(data_port)) != 0);
}

BOOST_AUTO_TEST_CASE(a_model_placed_by_replica_device_setter_trains_on_the_cluster_as_it_does_locally) {
  Cluster c;
  auto build = [] {
    auto root = Scope::root();
    auto s = root.with_device_function(replica_device_setter(1, {.worker_device = "/job:worker/task:1"}));
    auto x = ops::placeholder(s.with_op_name("x"), DType::float32, {4, 3});
    auto w = ops::variable(s.with_op_name("w"), {3, 1}, DType::float32);
    auto init = ops::assign(s, w, ops::fill(s, {3, 1}, ops::constant(s, 0.5f)));
    auto loss = ops::mean(s.with_op_name("loss"), ops::square(s, ops::matmul(s, x, w)));
    Node* train = Optimizer::momentum(0.1, 0.9).minimize(s, loss);
    return std::make_tuple(root, x, w, init, loss, train);
  };
  auto run = [&](const SessionOptions& options) {
    auto [root, x, w, init, loss, train] = build();
    Session session(root, options);
    session.run({}, {}, {init.node()});
    const FeedList feeds = {{x, Tensor::from_vector<float>({1, 0, 0, 0, 1, 0, 0, 0, 1, 1, 1, 1}, {4, 3})}};
    std::vector<float> losses;
    for (int i = 0; i < 5; ++i) {
      losses.push_back(session.run(feeds, {loss})[0].scalar_value<float>());
      session.run(feeds, {}, {train});
    }
    return std::make_pair(losses, session.transfer_stats());
  };
  auto [local, none] = run({});
  auto [cluster, stats] = run(on(c));
  BOOST_TEST(none.empty());
  BOOST_TEST(local == cluster, "the losses differ");
  // The variable lived on ps:0: it sent w to worker:1 every step and took its updates.
  auto ps = std::find_if(stats.begin(), stats.end(), [](const TaskTransfers& t) { return t.task == "ps:0"; });
  BOOST_TEST_REQUIRE((ps != stats.end()));
  BOOST_TEST(ps->values_sent >= 10u);
  BOOST_TEST(ps->values_received >= 5u);
}

BOOST_AUTO_TEST_CASE(a_step_that_failed_in_one_session_does_not_touch_the_same_step_of_another) {
  // Both sessions number their steps from 1: what a task forgets of session A's failed step 2
  // must not drop the values of session B's step 2.
  Cluster c;
  auto root = Scope::root();
  auto v = ops::variable(root.with_device("/job:ps/task:0").with_op_name("unset"), {2}, DType::float32);
  auto use = ops::mul(root.with_device("/job:worker/task:1"), v, ops::constant(root, 2.0f));
  auto fine = ops::add(root.with_device("/job:worker/task:1"), ops::constant(root, 1.0f), ops::constant(root, 2.0f));
  ThereAndBack g;
  Session a(root, on(c));
  Session b(g.root, on(c));
  BOOST_TEST(a.run({fine})[0].scalar_value<float>() == 3.0f);          // a's step 1
  error_of([&] { a.run({use}); }, ErrorCode::failed_precondition);    // a's step 2 fails
  BOOST_TEST(b.run(g.feeds, {g.y})[0].to_vector<float>() == g.expected);  // b's step 1
  RunOptions bounded;
  bounded.timeout = 20s;
  BOOST_TEST(b.run(g.feeds, {g.y}, {}, bounded)[0].to_vector<float>() == g.expected);  // b's step 2
}

BOOST_AUTO_TEST_CASE(a_task_stopped_before_its_graph_is_registered_fails_the_registration_naming_it) {
  Cluster c;
  ThereAndBack g;
  Session session(g.root, on(c));  // connected to every task
  BOOST_TEST_REQUIRE(c.nodes["worker:1"]->stop(5s), "worker:1 did not stop");
  // Registration waits for the tasks' answers; the stopped one is seen lost within the
  // connection timeout (long before the registration's own bound of minutes).
  auto message = error_of([&] { session.run(g.feeds, {g.y}); }, ErrorCode::unavailable);
  BOOST_TEST(contains(message, "worker:1 at " + c.address("worker:1")), message);
}
