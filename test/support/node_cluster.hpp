#pragma once
// troupe-node processes on 127.0.0.1 for a test: a cluster spec with each job's tasks on ports
// the OS picked free, one node per task started and awaited ("started on", within 30 s), every
// one stopped by its pid (SIGCONT, then SIGKILL) when this goes out of scope, also when the
// test fails (then with every node's log in the test's output). Needs TROUPE_NODE_BINARY (the test's CMake target defines it).
#include <signal.h>

#include <boost/test/results_collector.hpp>
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <exception>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "actors/session.hpp"
#include "test/support/child_process.hpp"
#include "test/support/free_port.hpp"
#include "test/support/scratch_dir.hpp"

namespace troupe::testing {

class NodeCluster {
 public:
  // jobs: {"ps", 2}, {"worker", 1}, ...; extra_args(task): more arguments for that task's node.
  // tls: every connection mutual TLS, with a CA and certificates made by `troupe-node
  // --make-certs` in DIR/certs (spec() is then DIR/certs/cluster.json, with its "tls" section).
  explicit NodeCluster(std::vector<std::pair<std::string, int>> jobs,
                       std::function<std::vector<std::string>(const std::string& task)> extra_args = {},
                       bool tls = false)
      : extra_args_(std::move(extra_args)) {
    std::string json;
    // All ports picked at once, each socket held until the last is bound: ports picked one by
    // one can come back the same (two tasks on one address, the second node refused).
    int total = 0;
    for (auto& [job, count] : jobs) total += count;
    const std::vector<uint16_t> ports = free_loopback_ports(total);
    std::size_t next = 0;
    for (auto& [job, count] : jobs) {
      std::string addresses;
      for (int k = 0; k < count; ++k) {
        const std::string task = fmt::format("{}:{}", job, k);
        ports_[task] = ports[next++];
        order_.push_back(task);
        addresses += fmt::format("{}\"127.0.0.1:{}\"", k ? ", " : "", ports_[task]);
      }
      json += fmt::format("{}\"{}\": [{}]", json.empty() ? "" : ", ", job, addresses);
    }
    std::ofstream(spec_) << "{\"cluster\": {" << json << "}}";
    if (tls) {
      ChildProcess make({TROUPE_NODE_BINARY, "--make-certs", dir_.file("certs"), "--cluster", spec_},
                        dir_.file("make-certs.out"), dir_.file("make-certs.err"));
      const std::optional<int> code = make.wait_exit(std::chrono::seconds(30));
      BOOST_TEST_REQUIRE((code && *code == 0), make.out() << make.err());
      spec_ = dir_.file("certs/cluster.json");
      tls_ = true;
    }
    for (auto& task : order_) start(task);
  }
  ~NodeCluster() {
    for (auto& [task, node] : nodes_) {
      node->signal(SIGCONT);
      node->signal(SIGKILL);
    }
    // A failed test shows what each node logged (its peers, their losses, refused graphs).
    namespace utf = boost::unit_test;
    if (std::uncaught_exceptions() > 0 ||
        !utf::results_collector.results(utf::framework::current_test_case().p_id).passed())
      for (auto& [task, node] : nodes_)
        BOOST_TEST_MESSAGE("troupe-node " << task << " logged:\n" << node->out() << node->err());
  }
  NodeCluster(const NodeCluster&) = delete;
  NodeCluster& operator=(const NodeCluster&) = delete;

  // Starts the task's node (again, after it was killed: a new incarnation on the same port).
  void start(const std::string& task) {
    std::vector<std::string> argv{TROUPE_NODE_BINARY, "--cluster", spec_, "--task", task, "--threads", "1"};
    if (extra_args_)
      for (auto& a : extra_args_(task)) argv.push_back(a);
    const int n = starts_[task]++;
    auto node = std::make_unique<ChildProcess>(argv, dir_.file(fmt::format("{}-{}.out", task, n)),
                                               dir_.file(fmt::format("{}-{}.err", task, n)));
    if (!node->wait_for_output("started on", std::chrono::seconds(30)))  // state() only then: it runs gdb
      BOOST_FAIL(task << " did not start: " << node->out() << node->err() << node->state());
    nodes_[task] = std::move(node);
  }

  ChildProcess& node(const std::string& task) { return *nodes_.at(task); }
  uint16_t port(const std::string& task) const { return ports_.at(task); }
  const std::string& spec() const { return spec_; }
  ScratchDir& dir() { return dir_; }
  // A session whose target is the task's node.
  SessionOptions session_on(const std::string& task,
                            std::chrono::milliseconds operation_timeout = std::chrono::seconds(60)) const {
    SessionOptions options;
    options.target = fmt::format("troupe://127.0.0.1:{}", port(task));
    options.operation_timeout = operation_timeout;
    if (tls_) options.tls = ClusterSpec::from_file(spec_).tls_client();
    return options;
  }

 private:
  ScratchDir dir_;
  std::string spec_ = dir_.file("cluster.json");
  bool tls_ = false;
  std::function<std::vector<std::string>(const std::string&)> extra_args_;
  std::vector<std::string> order_;
  std::map<std::string, uint16_t> ports_;
  std::map<std::string, int> starts_;
  std::map<std::string, std::unique_ptr<ChildProcess>> nodes_;
};

}  // namespace troupe::testing
