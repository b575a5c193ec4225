// A Chrome trace of a step over two troupe-node processes (ps:0 and worker:0 on 127.0.0.1): a
// process row per task named with its address, each task's kernels in its own row, every value
// that crossed as a send slice in the sender's process and a recv slice in the receiver's with
// one flow arrow between them, both tasks' clock offsets estimated, and the tasks' kernels inside
// the step's slice on the session's clock.
#include <boost/test/unit_test.hpp>

#include <csignal>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "test/support/node_cluster.hpp"
#include "test/support/scratch_dir.hpp"

using namespace troupe;
using json = nlohmann::json;
using troupe::testing::NodeCluster;
using namespace std::chrono_literals;

BOOST_AUTO_TEST_CASE(a_traced_two_process_step_has_a_row_per_task_and_a_flow_per_value_that_crossed) {
  NodeCluster cluster({{"ps", 1}, {"worker", 1}});
  auto root = Scope::root();
  auto ps = root.with_device("/job:ps/task:0");
  auto v = ops::variable(ps.with_op_name("v"), {64, 64}, DType::float32);
  auto init = ops::assign(ps, v, ops::constant(ps, Tensor::from_vector<float>(std::vector<float>(64 * 64, 0.5f), {64, 64})));
  auto product = ops::matmul(root.with_device("/job:worker/task:0").with_op_name("product"), v, v);
  auto total = ops::sum(ps.with_op_name("total"), product);

  SessionOptions options = cluster.session_on("worker:0");
  options.trace.file = cluster.dir().file("trace.json");
  options.trace.first_step = 3;
  options.trace.last_step = 3;
  {
    Session session(root, options);
    session.run({}, {}, {init.node()});
    for (int i = 0; i < 3; ++i) BOOST_TEST(session.run({total})[0].scalar_value<float>() == 64 * 64 * 64 * 0.25f);
  }
  std::ifstream in(options.trace.file);
  BOOST_TEST_REQUIRE(in.good());
  const json trace = json::parse(in);

  std::map<int, std::string> process;
  for (auto& e : trace["traceEvents"])
    if (e["ph"] == "M" && e["name"] == "process_name") process[e["pid"]] = e["args"]["name"];
  int ps_pid = 0, worker_pid = 0;
  for (auto& [pid, name] : process) {
    if (name.starts_with("ps:0 at 127.0.0.1:")) ps_pid = pid;
    if (name.starts_with("worker:0 at 127.0.0.1:")) worker_pid = pid;
  }
  BOOST_TEST_REQUIRE(ps_pid > 1);
  BOOST_TEST_REQUIRE(worker_pid > 1);
  BOOST_TEST(process[1].starts_with("session"));

  double step_begin = 0, step_end = 0;
  std::map<std::string, int> kernel_pid;
  std::map<std::string, std::set<int>> flow_pids;  // id -> pids of its start and end
  std::map<std::string, std::string> flow_phase;
  int sends = 0, recvs = 0;
  for (auto& e : trace["traceEvents"]) {
    const std::string cat = e.value("cat", "");
    if (e["ph"] == "X" && cat == "step") {
      BOOST_TEST(e["args"]["step"] == 3);
      step_begin = e["ts"];
      step_end = step_begin + e["dur"].get<double>();
    }
    if (e["ph"] == "X" && cat == "kernel") {
      BOOST_TEST(e["args"]["step"] == 3);
      kernel_pid[e["args"]["node"]] = e["pid"];
    }
    if (e["ph"] == "X" && cat == "transfer") {
      BOOST_TEST(e["args"]["bytes"].get<int64_t>() > 0);
      (e["name"] == "send" ? sends : recvs)++;
    }
    if (e["ph"] == "s" || e["ph"] == "f") {
      flow_pids[e["id"]].insert(e["pid"].get<int>());
      flow_phase[e["id"]] += e["ph"].get<std::string>();
    }
  }
  BOOST_TEST(kernel_pid["product"] == worker_pid);
  BOOST_TEST(kernel_pid["total"] == ps_pid);
  // v goes to worker:0, product comes back to ps:0: two values, each a send, a recv and an arrow.
  BOOST_TEST(sends == 2);
  BOOST_TEST(recvs == 2);
  BOOST_TEST(flow_pids.size() == 2u);
  for (auto& [id, pids] : flow_pids) {
    BOOST_TEST(pids == (std::set<int>{ps_pid, worker_pid}), "flow " << id);
    BOOST_TEST((flow_phase[id] == "sf" || flow_phase[id] == "fs"), "flow " << id << ": " << flow_phase[id]);
  }
  // Both clocks estimated; on one host, within a millisecond of the session's.
  for (std::string task : {"ps:0", "worker:0"}) {
    const json& c = trace["otherData"]["clock_offsets"][task];
    BOOST_TEST(c["uncertainty_us"].get<double>() >= 0.0, task);
    BOOST_TEST(std::abs(c["offset_us"].get<double>()) < 1000.0 + c["uncertainty_us"].get<double>(), task);
  }
  // The tasks' kernels ran within the step, as the session's clock saw it (give the estimate's
  // uncertainty).
  for (auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e.value("cat", "") == "kernel") {
      BOOST_TEST(e["ts"].get<double>() >= step_begin - 1000.0);
      BOOST_TEST(e["ts"].get<double>() + e["dur"].get<double>() <= step_end + 1000.0);
    }
}

BOOST_AUTO_TEST_CASE(troupe_node_trace_writes_the_tasks_share_of_the_steps_asked_for) {
  troupe::testing::ScratchDir traces;
  const std::string file = traces.file("ps.json");
  NodeCluster cluster({{"ps", 1}, {"worker", 1}}, [&](const std::string& task) {
    return task == "ps:0" ? std::vector<std::string>{"--trace", file, "--trace-steps", "2-3"} : std::vector<std::string>{};
  });
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_device("/job:worker/task:0").with_op_name("x"), DType::float32, {4});
  auto doubled = ops::mul(root.with_device("/job:ps/task:0").with_op_name("doubled"), x, ops::constant(root, 2.0f));
  Session session(root, cluster.session_on("worker:0"));
  for (int i = 0; i < 4; ++i)
    session.run({{x, Tensor::from_vector<float>({1, 2, 3, 4}, {4})}}, {doubled});
  // Written after each traced step, half a second after it ends.
  json trace;
  for (int tries = 0; tries < 100; ++tries) {
    std::ifstream in(file);
    if (in.good()) {
      trace = json::parse(in);
      if (trace["otherData"]["steps"].size() == 2) break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  BOOST_TEST_REQUIRE(trace.is_object(), "no trace at " << file);
  BOOST_TEST(trace["otherData"]["steps"] == json::array({2, 3}), trace["otherData"].dump());
  std::set<uint64_t> kernel_steps;
  bool named = false;
  for (auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "process_name") named = e["args"]["name"].get<std::string>().starts_with("ps:0 at ");
    if (e["ph"] == "X" && e.value("cat", "") == "kernel" && e["args"]["node"] == "doubled")
      kernel_steps.insert(e["args"]["step"].get<uint64_t>());
  }
  BOOST_TEST(named);
  BOOST_TEST(kernel_steps == (std::set<uint64_t>{2, 3}), trace.dump().substr(0, 3000));
}

// The tasks are asked for their share of the trace together and awaited together: two that hang
// (stopped) are each named in the trace's notes, and the trace is written with the session's
// own events and the answering task's.
BOOST_AUTO_TEST_CASE(a_trace_whose_tasks_hang_names_each_of_them_and_is_still_written) {
  NodeCluster cluster({{"ps", 2}, {"worker", 1}});
  auto root = Scope::root();
  std::vector<Output> vs;
  for (int t = 0; t < 2; ++t) {
    auto ps = root.with_device(fmt::format("/job:ps/task:{}", t));
    auto v = ops::variable(ps.with_op_name(fmt::format("v{}", t)), {8, 8}, DType::float32);
    vs.push_back(ops::assign(ps, v, ops::constant(ps, Tensor::from_vector<float>(std::vector<float>(64, 1.0f), {8, 8}))));
  }
  auto worker = root.with_device("/job:worker/task:0");
  auto total = ops::sum(worker.with_op_name("total"), ops::matmul(worker.with_op_name("product"), vs[0], vs[1]));

  SessionOptions options = cluster.session_on("worker:0");
  options.trace.file = cluster.dir().file("trace.json");
  options.trace.first_step = 2;
  options.trace.last_step = 3;  // never reached: the session writes the trace as it closes
  {
    Session session(root, options);
    for (int i = 0; i < 2; ++i) BOOST_TEST(session.run({total})[0].scalar_value<float>() == 8 * 8 * 8.0f);
    BOOST_TEST_REQUIRE(cluster.node("ps:0").stop(5s), "ps:0 did not stop");
    BOOST_TEST_REQUIRE(cluster.node("ps:1").stop(5s), "ps:1 did not stop");
  }  // writes the trace, asking the tasks for theirs
  std::ifstream in(options.trace.file);
  BOOST_TEST_REQUIRE(in.good());
  const json trace = json::parse(in);
  const std::string notes = trace["otherData"]["notes"].dump();
  BOOST_TEST(notes.find("no events from ps:0") != std::string::npos, notes);
  BOOST_TEST(notes.find("no events from ps:1") != std::string::npos, notes);
  BOOST_TEST(notes.find("worker:0") == std::string::npos, notes);
  bool product = false;
  for (auto& e : trace["traceEvents"])
    if (e["ph"] == "X" && e.value("cat", "") == "kernel" && e["args"]["node"] == "product") product = true;
  BOOST_TEST(product);
}
