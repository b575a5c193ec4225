// Chrome traces of a local session (SessionOptions::trace, core/trace.hpp): the steps asked for
// and only those, a slice per kernel naming its op, node, input shapes, step, frame and
// iteration, inside its step's slice, rows named, memory counters; loops' iterations told apart;
// a bounded number of events; RunOptions::trace without a file refused.
#include <boost/test/unit_test.hpp>

#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "actors/session.hpp"
#include "core/trace.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/scratch_dir.hpp"

using namespace troupe;
using json = nlohmann::json;

namespace {

json read_trace(const std::string& path) {
  std::ifstream in(path);
  BOOST_TEST_REQUIRE(in.good(), "no trace file at " << path);
  return json::parse(in);
}

std::vector<json> events_where(const json& trace, const std::string& ph, const std::string& cat = "") {
  std::vector<json> out;
  for (auto& e : trace["traceEvents"])
    if (e["ph"] == ph && (cat.empty() || e.value("cat", "") == cat)) out.push_back(e);
  return out;
}

struct MatmulRelu {
  Scope root = Scope::root();
  Output x = ops::placeholder(root.with_op_name("x"), DType::float32, {2, 3});
  Output w = ops::constant(root.with_op_name("w"), Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}));
  Output y = ops::matmul(root.with_op_name("y"), x, w);
  Output z = ops::relu(root.with_op_name("z"), y);
  Tensor feed = Tensor::from_vector<float>({1, -2, 3, -4, 5, -6}, {2, 3});
};

}  // namespace

BOOST_AUTO_TEST_SUITE(tracing)

BOOST_AUTO_TEST_CASE(a_traced_step_has_a_slice_per_kernel_with_its_node_shapes_and_step_inside_the_steps_slice) {
  troupe::testing::ScratchDir dir;
  MatmulRelu g;
  SessionOptions options;
  options.trace.file = dir.file("trace.json");
  options.trace.first_step = 2;
  options.trace.last_step = 3;
  Session session(g.root, options);
  for (int i = 0; i < 4; ++i) session.run({{g.x, g.feed}}, {g.z});  // written when step 3 ends

  const json trace = read_trace(options.trace.file);
  std::map<uint64_t, std::pair<double, double>> step_span;
  for (auto& s : events_where(trace, "X", "step")) {
    const uint64_t step = s["args"]["step"];
    BOOST_TEST(s["name"] == fmt::format("step {}", step));
    step_span[step] = {s["ts"].get<double>(), s["ts"].get<double>() + s["dur"].get<double>()};
  }
  BOOST_TEST(step_span.size() == 2u);
  BOOST_TEST(step_span.count(2) == 1u);
  BOOST_TEST(step_span.count(3) == 1u);

  std::map<std::string, int> per_node;
  std::set<int> kernel_rows;
  for (auto& k : events_where(trace, "X", "kernel")) {
    const std::string node = k["args"]["node"];
    ++per_node[node];
    BOOST_TEST(k["name"] == k["args"]["op"]);
    BOOST_TEST(k["pid"] == 1);
    kernel_rows.insert(k["tid"].get<int>());
    const uint64_t step = k["args"]["step"];
    BOOST_TEST_REQUIRE(step_span.count(step) == 1u, "a kernel of untraced step " << step);
    BOOST_TEST(k["ts"].get<double>() >= step_span[step].first - 0.001);
    BOOST_TEST(k["ts"].get<double>() + k["dur"].get<double>() <= step_span[step].second + 0.001);
    if (node == "y") {
      BOOST_TEST(k["name"] == "MatMul");
      BOOST_TEST(k["args"]["inputs"] == "[2,3] [3,2]");
    }
    if (node == "z") BOOST_TEST(k["args"]["inputs"] == "[2,2]");
  }
  BOOST_TEST(per_node["y"] == 2);
  BOOST_TEST(per_node["z"] == 2);

  // Every row a kernel ran on is named, and so is the process.
  std::set<int> named_rows;
  bool process_named = false;
  for (auto& m : events_where(trace, "M")) {
    if (m["name"] == "thread_name") named_rows.insert(m["tid"].get<int>());
    if (m["name"] == "process_name" && m["pid"] == 1) process_named = m["args"]["name"].get<std::string>().starts_with("local");
  }
  for (int row : kernel_rows) BOOST_TEST(named_rows.count(row) == 1u, "row " << row << " has no name");
  BOOST_TEST(process_named);
  // Memory in use on the CPU, as a counter.
  const auto counters = events_where(trace, "C", "memory");
  BOOST_TEST_REQUIRE(!counters.empty());
  BOOST_TEST(counters[0]["name"].get<std::string>().starts_with("memory in use, device:CPU:"));
  BOOST_TEST(counters[0]["args"]["bytes"].get<int64_t>() >= 0);
  BOOST_TEST(trace["otherData"]["steps"] == json::array({2, 3}));
}

BOOST_AUTO_TEST_CASE(a_loops_kernels_carry_their_frame_and_iteration) {
  troupe::testing::ScratchDir dir;
  Scope root = Scope::root();
  Output n = ops::placeholder(root.with_op_name("n"), DType::int32, Shape{});
  std::vector<Output> out = ops::while_loop(
      root, [&](const Scope& s, const std::vector<Output>& v) { return ops::less(s, v[0], n); },
      [](const Scope& s, const std::vector<Output>& v) {
        return std::vector<Output>{ops::add(s.with_op_name("next"), v[0], ops::constant(s, int32_t(1)))};
      },
      {ops::constant(root, int32_t(0))});
  SessionOptions options;
  options.trace.file = dir.file("loop.json");
  Session session(root, options);
  RunOptions traced;
  traced.trace = true;
  BOOST_TEST(session.run({{n, Tensor::scalar<int32_t>(4)}}, {out[0]}, {}, traced)[0].scalar_value<int32_t>() == 4);
  session.write_trace();
  std::set<int64_t> iterations;
  for (auto& k : events_where(read_trace(options.trace.file), "X", "kernel"))
    if (k["args"]["node"].get<std::string>().ends_with("next")) {
      BOOST_TEST(k["args"].contains("frame"));
      iterations.insert(k["args"]["iteration"].get<int64_t>());
    }
  BOOST_TEST(iterations == (std::set<int64_t>{0, 1, 2, 3}));
}

BOOST_AUTO_TEST_CASE(tracing_keeps_at_most_max_events_and_says_how_many_it_left_out) {
  troupe::testing::ScratchDir dir;
  MatmulRelu g;
  SessionOptions options;
  options.trace.file = dir.file("small.json");
  options.trace.first_step = 1;
  options.trace.last_step = 20;
  options.trace.max_events = 10;
  {
    Session session(g.root, options);
    for (int i = 0; i < 20; ++i) session.run({{g.x, g.feed}}, {g.z});
  }
  const json trace = read_trace(options.trace.file);
  std::size_t kept = 0;
  for (auto& e : trace["traceEvents"]) kept += e["ph"] != "M";
  BOOST_TEST(kept <= 10u);
  BOOST_TEST(trace["otherData"]["events_left_out"].get<std::size_t>() > 0u);
  troupe::trace::set_limit(1'000'000);
}

BOOST_AUTO_TEST_CASE(tracing_a_step_without_a_trace_file_is_refused) {
  MatmulRelu g;
  Session session(g.root);
  RunOptions traced;
  traced.trace = true;
  const std::string error = troupe::testing::error_of([&] { session.run({{g.x, g.feed}}, {g.z}, {}, traced); }, ErrorCode::failed_precondition);
  BOOST_TEST(troupe::testing::contains(error, "SessionOptions::trace.file names no file"), error);
  BOOST_TEST(troupe::testing::contains(troupe::testing::error_of([&] { session.write_trace(); }, ErrorCode::failed_precondition), "traces nothing"));
}

BOOST_AUTO_TEST_CASE(a_trace_that_cannot_be_written_fails_naming_the_file) {
  troupe::testing::ScratchDir dir;
  MatmulRelu g;
  SessionOptions options;
  options.trace.file = dir.file("no/such/dir/trace.json");
  Session session(g.root, options);
  RunOptions traced;
  traced.trace = true;
  session.run({{g.x, g.feed}}, {g.z}, {}, traced);
  const std::string error = troupe::testing::error_of([&] { session.write_trace(); }, ErrorCode::not_found);
  BOOST_TEST(troupe::testing::contains(error, dir.file("no/such/dir/trace.json")), error);
}

BOOST_AUTO_TEST_SUITE_END()
