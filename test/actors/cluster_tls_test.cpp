// Only members get in: troupe-node processes on 127.0.0.1 whose spec has a "tls" section (a CA
// and certificates made by `troupe-node --make-certs`) talk mutual TLS; a session with the
// spec's client identity runs steps across them. A peer speaking plain CAF, one with a
// certificate of another CA (also one that trusts this cluster's CA), one with no certificate,
// and a TCP peer that never speaks are each refused, logged by the node with the peer's address
// and why, and the node goes on serving its members. Every process is stopped by its pid.
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <fstream>
#include <mutex>
#include <sstream>

#include "actors/cluster/tls.hpp"
#include "actors/cluster/tls_watch.hpp"
#include "actors/session.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/listening_ports.hpp"
#include "test/support/skip.hpp"
#include "test/support/node_cluster.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using troupe::testing::ChildProcess;
using troupe::testing::contains;
using troupe::testing::NodeCluster;

namespace {

// `troupe-node --status` of the cluster at `task`'s address, with `spec`'s client identity
// (none: ""): its exit code and everything it printed.
std::pair<int, std::string> status_of(NodeCluster& cluster, const std::string& task, const std::string& spec,
                                      const std::string& tag) {
  std::vector<std::string> argv{TROUPE_NODE_BINARY, "--status", fmt::format("127.0.0.1:{}", cluster.port(task))};
  if (!spec.empty()) argv.insert(argv.end(), {"--cluster", spec});
  ChildProcess status(argv, cluster.dir().file(tag + ".out"), cluster.dir().file(tag + ".err"));
  const auto code = status.wait_exit(30s);
  return {code ? *code : -1, status.out() + status.err()};
}

// A variable on ps:0 that worker:0 bumps by {10, 20}: each step crosses both nodes.
struct Counter {
  Scope root = Scope::root();
  Output v = ops::variable(root.with_device("/job:ps/task:0").with_op_name("counter"), {2}, DType::float32);
  Output init = ops::assign(root.with_device("/job:ps/task:0"), v, ops::constant<float>(root, {1.0f, 2.0f}, {2}));
  Output bump = ops::assign_add(root.with_device("/job:worker/task:0"), v, ops::constant<float>(root, {10.0f, 20.0f}, {2}));
  Session session;
  explicit Counter(const NodeCluster& cluster) : session(root, cluster.session_on("worker:0")) {
    session.run({}, {}, {init.node()});
  }
  std::vector<float> bumped(int times) {
    for (int i = 0; i < times; ++i) session.run({}, {}, {bump.node()});
    return session.run({v})[0].to_vector<float>();
  }
};

int connect_to(uint16_t port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  BOOST_TEST_REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  timeval bound{10, 0};  // every read below is bounded
  ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &bound, sizeof bound);
  ::setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &bound, sizeof bound);
  return fd;
}

// A TLS client that trusts the cluster's CA and shows no certificate: Python's ssl module in a
// child process (CAF's module without a certificate offers anonymous ciphers only; and this
// process must not link libssl ahead of Troupe, actors/cluster/tls_watch.hpp). With TLS 1.3 its
// handshake ends before the node has checked it; the node's verdict is the first record read
// after. Returns what the child printed: "let in" when the node answered with data, else the error.
std::string read_as_a_client_without_certificate(NodeCluster& cluster, uint16_t port, const std::string& ca) {
  const std::string script = fmt::format(
      "import socket, ssl\n"
      "c = ssl.create_default_context(cafile='{}'); c.check_hostname = False\n"
      "s = c.wrap_socket(socket.create_connection(('127.0.0.1', {}), timeout=10))\n"
      "try:\n"
      "  print('let in' if s.recv(1) else 'closed')\n"
      "except Exception as e:\n"
      "  print('refused:', e)\n",
      ca, port);
  ChildProcess client({"/usr/bin/python3", "-c", script}, cluster.dir().file("nocert.out"), cluster.dir().file("nocert.err"));
  const auto code = client.wait_exit(30s);
  return (code ? "" : "(no exit within 30 s) ") + client.out() + client.err();
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_cluster_with_a_tls_section_runs_its_steps_over_mutual_tls) {
  NodeCluster cluster({{"ps", 1}, {"worker", 1}}, {}, /*tls=*/true);
  BOOST_TEST(contains(cluster.node("ps:0").out(), "mutual TLS, certificate "), cluster.node("ps:0").out());
  Counter counter(cluster);
  BOOST_TEST(counter.bumped(3) == (std::vector<float>{31.0f, 62.0f}));
  // A value that crosses from worker:0 to ps:0 and back does so over the data connections,
  // which are TLS too.
  auto five = ops::constant<float>(counter.root.with_device("/job:worker/task:0"), {5.0f}, {1});
  auto there = ops::identity(counter.root.with_device("/job:ps/task:0"), five);
  auto back = ops::identity(counter.root.with_device("/job:worker/task:0"), there);
  BOOST_TEST(counter.session.run({back})[0].to_vector<float>() == (std::vector<float>{5.0f}));
  uint64_t sent = 0;
  for (auto& t : counter.session.transfer_stats()) {
    BOOST_TEST(t.values_sent_direct == t.values_sent, t.task);
    sent += t.values_sent;
  }
  BOOST_TEST(sent > 0u);
  // The members connected to each other (through TLS: nothing else is listening) and nobody was refused.
  auto [code, out] = status_of(cluster, "ps:0", cluster.spec(), "status");
  BOOST_TEST(code == 0, out);
  BOOST_TEST(contains(out, "ps:0 at 127.0.0.1:"), out);
  BOOST_TEST(contains(out, "worker:0 at 127.0.0.1:"), out);
  for (auto task : {"ps:0", "worker:0"})
    BOOST_TEST(!contains(cluster.node(task).out(), "refused"), cluster.node(task).out());
}

BOOST_AUTO_TEST_CASE(peers_without_a_certificate_of_the_cluster_are_refused_and_logged_and_the_node_keeps_serving) {
  NodeCluster cluster({{"ps", 1}, {"worker", 1}}, {}, /*tls=*/true);
  ChildProcess& ps = cluster.node("ps:0");
  // A member's session, connected before the refusals and used after them.
  Counter counter(cluster);
  BOOST_TEST(counter.bumped(1) == (std::vector<float>{11.0f, 22.0f}));

  // Plain CAF (no TLS at all).
  {
    auto [code, out] = status_of(cluster, "ps:0", "", "plain");
    BOOST_TEST(code == 1, out);
    BOOST_TEST(contains(out, "disconnect_during_handshake"), out);
    BOOST_TEST(contains(out, "give this process the spec's tls files"), out);
    BOOST_TEST(ps.wait_for_output("it does not speak TLS", 10s), ps.out());
  }
  // Another cluster's CA and certificates: the peer gives up on the node's certificate, and the
  // node logs it.
  const std::string other = make_cluster_certificates(cluster.spec(), cluster.dir().file("other"));
  {
    auto [code, out] = status_of(cluster, "ps:0", other, "other");
    BOOST_TEST(code == 1, out);
    BOOST_TEST(ps.wait_for_output("it refused this process's certificate", 10s), ps.out());
  }
  // A peer of another CA that trusts this cluster's CA too: the node refuses its certificate.
  {
    const std::string dir = cluster.dir().file("other");
    std::ofstream(dir + "/both.pem") << read_file(cluster.dir().file("certs/ca.pem")) << read_file(dir + "/ca.pem");
    std::string spec = read_file(other);
    spec.replace(spec.find("\"ca.pem\""), 8, "\"both.pem\"");
    std::ofstream(dir + "/intruder.json") << spec;
    auto [code, out] = status_of(cluster, "ps:0", dir + "/intruder.json", "intruder");
    BOOST_TEST(code == 1, out);
    BOOST_TEST(ps.wait_for_output("its certificate is not from this cluster's CA", 10s), ps.out());
  }
  // No certificate at all.
  {
    const std::string verdict =
        read_as_a_client_without_certificate(cluster, cluster.port("ps:0"), cluster.dir().file("certs/ca.pem"));
    BOOST_TEST(contains(verdict, "refused:"), verdict);
    BOOST_TEST_MESSAGE("a client without a certificate read: " << verdict);
    BOOST_TEST(ps.wait_for_output("it has no certificate", 10s), ps.out());
  }
  // TCP that never speaks: cut off after the handshake's bound (it would hold the node's network
  // thread busy for as long as it stayed).
  {
    const int fd = connect_to(cluster.port("ps:0"));
    pollfd p{fd, POLLIN, 0};
    const int ready = ::poll(&p, 1, 15000);
    char byte;
    BOOST_TEST(ready == 1, "the node kept a silent connection open for 15 s");
    BOOST_TEST(::recv(fd, &byte, 1, 0) == 0);
    ::close(fd);
    BOOST_TEST(ps.wait_for_output("no TLS handshake within", 10s), ps.out());
  }
  // Every refusal names the peer's address; the node still serves its members: on the
  // connections made before (a refused handshake leaves OpenSSL errors in the node's network
  // thread that used to fail the next read of every other connection) and on new ones.
  BOOST_TEST(contains(ps.out(), "refused a TLS connection from 127.0.0.1:"), ps.out());
  BOOST_TEST(counter.bumped(2) == (std::vector<float>{31.0f, 62.0f}));
  BOOST_TEST(Counter(cluster).bumped(1) == (std::vector<float>{11.0f, 22.0f}));
  auto [code, out] = status_of(cluster, "ps:0", cluster.spec(), "member");
  BOOST_TEST(code == 0, out);
  BOOST_TEST_MESSAGE("ps:0 logged:\n" << ps.out());
}

// The task's data port (the one its tensors come in on) is TLS too: a client without a
// certificate is refused there and logged with its address, and the members' values still cross.
BOOST_AUTO_TEST_CASE(the_data_port_refuses_a_peer_without_a_certificate_and_logs_it,
                     *troupe::testing::runs_here(troupe::testing::why_no_ports_listed)) {
  NodeCluster cluster({{"ps", 1}, {"worker", 1}}, {}, /*tls=*/true);
  ChildProcess& ps = cluster.node("ps:0");
  Counter counter(cluster);
  BOOST_TEST(counter.bumped(1) == (std::vector<float>{11.0f, 22.0f}));
  int data_port = 0;
  for (int port : troupe::testing::listening_ports_of(ps.pid()))
    if (port != cluster.port("ps:0")) data_port = port;
  BOOST_TEST_REQUIRE(data_port != 0, "ps:0 listens on no data port");
  const std::string verdict =
      read_as_a_client_without_certificate(cluster, uint16_t(data_port), cluster.dir().file("certs/ca.pem"));
  BOOST_TEST(contains(verdict, "refused:"), verdict);
  BOOST_TEST(ps.wait_for_output("refused a data connection from 127.0.0.1:", 10s), ps.out());
  BOOST_TEST(contains(ps.out(), "its TLS handshake failed"), ps.out());
  BOOST_TEST_MESSAGE("ps:0 logged:\n" << ps.out());
  BOOST_TEST(counter.bumped(1) == (std::vector<float>{21.0f, 42.0f}));
}

BOOST_AUTO_TEST_CASE(a_peer_of_another_ca_that_keeps_retrying_is_logged_once_then_counted_on_both_sides) {
  NodeCluster cluster({{"ps", 1}}, {}, /*tls=*/true);
  ChildProcess& ps = cluster.node("ps:0");
  const std::string other = make_cluster_certificates(cluster.spec(), cluster.dir().file("other"));
  std::mutex mutex;
  std::vector<std::string> tls_lines, waiting_lines;
  set_tls_event_log([&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    tls_lines.push_back(line);
  });
  SessionOptions options;
  options.target = fmt::format("troupe://127.0.0.1:{}", cluster.port("ps:0"));
  options.tls = ClusterSpec::from_file(other).tls_client();
  options.cluster_startup_timeout = 12s;  // it retries every 100 ms meanwhile
  options.on_waiting = [&](const std::string& line) {
    std::lock_guard<std::mutex> lock(mutex);
    waiting_lines.push_back(line);
  };
  auto root = Scope::root();
  ops::constant(root, 1.0f);
  const auto start = std::chrono::steady_clock::now();
  auto e = troupe::testing::error_of([&] { Session session(root, options); }, ErrorCode::unavailable);
  const double waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  set_tls_event_log({});
  BOOST_TEST_MESSAGE(e);
  BOOST_TEST(contains(e, "did not answer: this session waited 1"), e);  // 12.x s, the time it waited in all
  BOOST_TEST(waited >= 11.9);
  // The node: one line in full, then counts (at most one per 10 s), not one per attempt.
  std::istringstream out(ps.out());
  int refusals = 0, counted = 0;
  for (std::string line; std::getline(out, line);) {
    if (contains(line, "refused a TLS connection from 127.0.0.1")) ++refusals;
    if (contains(line, "more time(s) in the last")) ++counted;
  }
  BOOST_TEST(refusals >= 1, ps.out());
  BOOST_TEST(refusals <= 3, ps.out());
  BOOST_TEST(counted >= 1, ps.out());
  std::lock_guard<std::mutex> lock(mutex);
  BOOST_TEST(tls_lines.size() >= 1u);
  BOOST_TEST(tls_lines.size() <= 3u, fmt::format("{}", fmt::join(tls_lines, "\n")));
  BOOST_TEST(waiting_lines.size() >= 1u);
  BOOST_TEST(waiting_lines.size() <= 3u, fmt::format("{}", fmt::join(waiting_lines, "\n")));
  BOOST_TEST(contains(waiting_lines.front(), "waiting for the session's target member at 127.0.0.1:"),
             waiting_lines.front());
}

BOOST_AUTO_TEST_CASE(a_member_that_dies_leaves_the_other_tls_connections_of_its_peers_working) {
  NodeCluster cluster({{"ps", 1}, {"worker", 2}}, {}, /*tls=*/true);
  Counter counter(cluster);
  BOOST_TEST(counter.bumped(1) == (std::vector<float>{11.0f, 22.0f}));
  {
    // worker:1 reads from ps:0 (their connection made), then is killed.
    auto root = Scope::root();
    auto x = ops::variable(root.with_device("/job:ps/task:0").with_op_name("x"), {1}, DType::float32);
    auto init = ops::assign(root.with_device("/job:ps/task:0"), x, ops::constant<float>(root, {5.0f}, {1}));
    auto twice = ops::mul(root.with_device("/job:worker/task:1"), x, ops::constant(root, 2.0f));
    Session session(root, cluster.session_on("worker:1"));
    session.run({}, {}, {init.node()});
    BOOST_TEST(session.run({twice})[0].to_vector<float>() == (std::vector<float>{10.0f}));
  }
  cluster.node("worker:1").signal(SIGKILL);
  BOOST_TEST(cluster.node("ps:0").wait_for_output("peer lost: worker:1", 10s), cluster.node("ps:0").out());
  // ps:0's connections to worker:0 and to the session stay: its steps go on.
  BOOST_TEST(counter.bumped(2) == (std::vector<float>{31.0f, 62.0f}));
}

BOOST_AUTO_TEST_CASE(a_task_whose_key_is_not_its_certificates_does_not_start_and_says_which_files) {
  troupe::testing::ScratchDir dir;
  const auto ports = free_loopback_ports(2);
  std::ofstream(dir.file("spec.json")) << fmt::format(R"({{"cluster": {{"ps": ["127.0.0.1:{}"], "worker": ["127.0.0.1:{}"]}}}})",
                                                      ports[0], ports[1]);
  std::string spec = read_file(make_cluster_certificates(dir.file("spec.json"), dir.file("certs")));
  spec.replace(spec.find("\"ps-0.key\""), 10, "\"worker-0.key\"");
  std::ofstream(dir.file("certs/bad.json")) << spec;
  ChildProcess node({TROUPE_NODE_BINARY, "--cluster", dir.file("certs/bad.json"), "--task", "ps:0"}, dir.file("out"),
                    dir.file("err"));
  const auto code = node.wait_exit(30s);
  BOOST_TEST((code && *code == 1), node.err());
  BOOST_TEST(contains(node.err(), "task ps:0: TLS key " + dir.file("certs/worker-0.key") + " does not belong to certificate " +
                                      dir.file("certs/ps-0.pem")),
             node.err());
}
