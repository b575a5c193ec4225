// Placement (graph/placement.hpp): requests, colocation groups, soft placement, the errors, and
// the cost and alternate choices, over a made-up cluster of devices (no GPU needed).
#include <boost/test/unit_test.hpp>

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "graph/gradients.hpp"
#include "graph/placement.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/scratch_dir.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

const std::string kCpu0 = "/job:localhost/task:0/device:CPU:0";
const std::string kCpu1 = "/job:localhost/task:0/device:CPU:1";
const std::string kCpu2 = "/job:localhost/task:0/device:CPU:2";
const std::string kGpu0 = "/job:localhost/task:0/device:GPU:0";
const std::string kPs0 = "/job:ps/task:0/device:CPU:0";
const std::string kPs1 = "/job:ps/task:1/device:CPU:0";
const std::string kPs1Gpu = "/job:ps/task:1/device:GPU:0";

// GPUs have kernels only for MatMul; CPUs for everything.
PlacementOptions options(PlacementOptions::Policy policy = PlacementOptions::Policy::cost) {
  return {.devices = {kCpu0, kCpu1, kCpu2, kGpu0, kPs0, kPs1, kPs1Gpu},
          .has_kernel = [](const Node& node, const std::string& type) { return type == "CPU" || node.op == "MatMul"; },
          .policy = policy};
}

const std::string& device_of(const std::vector<std::string>& placed, const Output& x) {
  return placed.at(std::size_t(x.node()->id));
}

Output matrix(const Scope& s, const std::string& name, int64_t rows = 100) {
  return ops::placeholder(s.with_op_name(name), DType::float32, Shape{rows, 100});
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_full_request_is_honoured) {
  auto root = Scope::root();
  auto x = matrix(root.with_device(kPs1), "x");
  auto y = ops::matmul(root.with_device(kGpu0), x, x);
  auto z = ops::neg(root.with_device("/job:localhost/task:0/cpu:2"), y);
  auto placed = place(root.graph(), options());
  BOOST_TEST(device_of(placed, x) == kPs1);
  BOOST_TEST(device_of(placed, y) == kGpu0);
  BOOST_TEST(device_of(placed, z) == kCpu2);
}

BOOST_AUTO_TEST_CASE(a_partial_request_for_job_ps_picks_a_ps_device) {
  auto root = Scope::root();
  auto x = matrix(root, "x");
  auto y = ops::neg(root.with_device("/job:ps"), x);
  auto on_gpu = ops::matmul(root.with_device("/device:GPU:0"), x, x);
  auto placed = place(root.graph(), options());
  BOOST_TEST((device_of(placed, y) == kPs0 || device_of(placed, y) == kPs1));
  // Without a job, a request means the default job and task: the local GPU, not the ps one.
  BOOST_TEST(device_of(placed, on_gpu) == kGpu0);
}

BOOST_AUTO_TEST_CASE(an_op_reading_a_variable_goes_where_the_variable_is) {
  auto root = Scope::root();
  auto v = ops::variable(root.with_device(kPs1).with_op_name("v"), Shape{2}, DType::float32);
  auto set = ops::assign(root, v, ops::constant(root, Tensor::from_vector<float>({1, 2})));
  auto read = ops::read_variable(root, v);
  auto shared = ops::variable(root.with_device(kPs0).with_op_name("s"), Shape{2}, DType::float32,
                              {.shared_name = "shared"});
  auto add_to_shared = ops::assign_add(root.with_op_name("bump"), shared, ops::neg(root, read));
  auto placed = place(root.graph(), options());
  BOOST_TEST(device_of(placed, set) == kPs1);
  BOOST_TEST(device_of(placed, read) == kPs1);
  BOOST_TEST(device_of(placed, add_to_shared) == kPs0);
}

BOOST_AUTO_TEST_CASE(colocate_with_puts_a_node_with_its_target) {
  auto root = Scope::root();
  auto x = matrix(root, "x");
  auto a = ops::neg(root.with_device(kCpu2).with_op_name("a"), x);
  // The scope's own request yields to the colocation.
  auto b = ops::square(root.with_device(kPs0).colocate_with(a).with_op_name("b"), x);
  auto c = ops::exp(root.colocate_with(b).colocate_with(a).with_op_name("c"), x);
  BOOST_TEST(get_attr<std::vector<std::string>>(b.node()->attrs, "_class", "b") ==
                 std::vector<std::string>{"loc:@a"},
             boost::test_tools::per_element());
  BOOST_TEST(get_attr<std::vector<std::string>>(c.node()->attrs, "_class", "c") ==
                 (std::vector<std::string>{"loc:@b", "loc:@a"}),
             boost::test_tools::per_element());
  auto placed = place(root.graph(), options());
  BOOST_TEST(device_of(placed, b) == kCpu2);
  BOOST_TEST(device_of(placed, c) == kCpu2);
}

BOOST_AUTO_TEST_CASE(conflicting_requests_in_one_colocation_group_fail_naming_both_nodes_and_devices) {
  auto root = Scope::root();
  auto v = ops::variable(root.with_device("/device:CPU:0").with_op_name("v"), Shape{2}, DType::float32);
  ops::assign(root.with_device("/device:CPU:1").with_op_name("a"), v,
              ops::constant(root, Tensor::from_vector<float>({1, 2})));
  auto message = error_of([&] { place(root.graph(), options()); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(message, "Assign 'a' requests '/device:CPU:1'"), message);
  BOOST_TEST(contains(message, "VariableV2 'v', which requests '/device:CPU:0'"), message);
  BOOST_TEST(contains(message, "both use variable 'v'"), message);

  auto other = Scope::root();
  auto x = matrix(other, "x");
  auto p = ops::neg(other.with_device(kPs0).with_op_name("p"), x);
  ops::exp(other.colocate_with(p).with_device(kPs1).with_op_name("q"), x);
  message = error_of([&] { place(other.graph(), options()); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(message, "Exp 'q' requests '" + kPs1 + "'"), message);
  BOOST_TEST(contains(message, "Neg 'p', which requests '" + kPs0 + "'"), message);
  BOOST_TEST(contains(message, "Exp 'q' is colocated with Neg 'p'"), message);
}

BOOST_AUTO_TEST_CASE(in_a_single_process_the_jobs_and_tasks_asked_for_are_its_own) {
  // A graph written for a cluster: a variable on a ps task, an update asked for on a worker.
  auto root = Scope::root();
  auto v = ops::variable(root.with_device("/job:ps/task:7").with_op_name("v"), Shape{2}, DType::float32);
  auto a = ops::assign(root.with_device("/job:worker/task:2/device:CPU:1").with_op_name("a"), v,
                       ops::constant(root, Tensor::from_vector<float>({1, 2})));
  PlacementOptions local = options();
  local.single_process = true;
  auto placed = place(root.graph(), local);
  BOOST_TEST(device_of(placed, v) == kCpu1);  // the device the update asked for, in this process
  BOOST_TEST(device_of(placed, a) == kCpu1);
  // Across processes the same requests disagree.
  auto message = error_of([&] { place(root.graph(), options()); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(message, "Assign 'a' requests '/job:worker/task:2/device:CPU:1'"), message);
}

BOOST_AUTO_TEST_CASE(a_request_for_a_device_with_no_kernel_soft_places_on_the_cpu_of_the_same_task) {
  auto root = Scope::root();
  auto x = matrix(root.with_device(kPs1), "x");
  auto remote = ops::neg(root.with_device(kPs1Gpu), x);
  auto y = matrix(root.with_device(kCpu2), "y");
  auto local = ops::neg(root.with_device("/device:GPU:0"), y);
  auto missing = ops::neg(root.with_device("/device:GPU:7"), y);
  auto placed = place(root.graph(), options());
  BOOST_TEST(device_of(placed, remote) == kPs1);
  // Among the CPUs of the task, the one its input is on.
  BOOST_TEST(device_of(placed, local) == kCpu2);
  BOOST_TEST(device_of(placed, missing) == kCpu2);
}

BOOST_AUTO_TEST_CASE(a_node_soft_placed_on_a_cpu_is_told_once_per_op_type_on_standard_error) {
  auto root = Scope::root();
  auto x = matrix(root, "x");
  ops::abs(root.with_device("/device:GPU:0").with_op_name("first"), x);
  ops::abs(root.with_device("/device:GPU:0").with_op_name("second"), x);
  troupe::testing::ScratchDir dir;
  const std::string path = dir.file("stderr");
  auto placed_with_stderr_in = [&](const std::string& file) {
    std::fflush(stderr);
    const int saved = ::dup(2);
    const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    ::dup2(fd, 2);
    ::close(fd);
    place(root.graph(), options());
    std::fflush(stderr);
    ::dup2(saved, 2);
    ::close(saved);
    std::ifstream in(file);
    return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  };
  const std::string told = placed_with_stderr_in(path);
  BOOST_TEST(contains(told, "soft placement runs 1 op type(s) on a CPU instead of the device they asked for"), told);
  BOOST_TEST(contains(told, "asked for '/device:GPU:0'"), told);
  BOOST_TEST(std::count(told.begin(), told.end(), '\n') == 1, told);
  BOOST_TEST(placed_with_stderr_in(path + "2").empty(), "told again");
}

BOOST_AUTO_TEST_CASE(without_soft_placement_it_fails_naming_the_node_device_and_op) {
  auto root = Scope::root();
  auto x = matrix(root, "x");
  ops::neg(root.with_device("/device:GPU:0").with_op_name("n"), x);
  auto strict = options();
  strict.allow_soft_placement = false;
  auto message = error_of([&] { place(root.graph(), strict); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(message, "Neg 'n' requests device '/device:GPU:0'"), message);
  BOOST_TEST(contains(message, kGpu0), message);
  BOOST_TEST(contains(message, "op Neg has no GPU kernel"), message);
}

BOOST_AUTO_TEST_CASE(a_request_for_a_device_nobody_has_fails_listing_the_devices_there_are) {
  auto root = Scope::root();
  auto x = matrix(root, "x");
  ops::neg(root.with_device("/job:worker/task:3").with_op_name("n"), x);
  auto message = error_of([&] { place(root.graph(), options()); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(message, "Neg 'n' requests device '/job:worker/task:3'"), message);
  BOOST_TEST(contains(message, kCpu0 + ", " + kCpu1), message);
  BOOST_TEST(contains(message, kPs1Gpu), message);

  auto other = Scope::root();
  ops::neg(other.with_device("/device:GPU:7").with_op_name("m"), matrix(other, "x"));
  auto strict = options();
  strict.allow_soft_placement = false;
  message = error_of([&] { place(other.graph(), strict); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(message, "Neg 'm' requests device '/device:GPU:7'"), message);
  BOOST_TEST(contains(message, kGpu0), message);
}

BOOST_AUTO_TEST_CASE(a_malformed_spec_fails_naming_the_node) {
  auto root = Scope::root();
  ops::neg(root.with_device("/job:ps/replica:0/shelf:2").with_op_name("n"), matrix(root, "x"));
  auto message = error_of([&] { place(root.graph(), options()); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(message, "Neg 'n' requests device '/job:ps/replica:0/shelf:2'"), message);
  BOOST_TEST(contains(message, "shelf:2"), message);
}

BOOST_AUTO_TEST_CASE(unconstrained_nodes_follow_their_inputs) {
  auto root = Scope::root();
  auto x = matrix(root.with_device(kCpu1), "x");
  auto negated = ops::neg(root, x);
  auto squared = ops::square(root, negated);
  auto chain = ops::exp(root, squared);
  // The bigger input wins: 100 rows on CPU:2 against one row on CPU:1.
  auto big = matrix(root.with_device(kCpu2), "big", 100);
  auto small = matrix(root.with_device(kCpu1), "small", 1);
  auto sum = ops::add(root, small, big);
  auto placed = place(root.graph(), options());
  BOOST_TEST(device_of(placed, negated) == kCpu1);
  BOOST_TEST(device_of(placed, squared) == kCpu1);
  BOOST_TEST(device_of(placed, chain) == kCpu1);
  BOOST_TEST(device_of(placed, sum) == kCpu2);
}

// Nodes of one op that request nothing share their candidates (found once), not their device.
BOOST_AUTO_TEST_CASE(nodes_of_one_op_without_requests_each_follow_their_own_inputs) {
  auto root = Scope::root();
  auto on_1 = ops::neg(root, matrix(root.with_device(kCpu1), "x"));
  auto on_2 = ops::neg(root, matrix(root.with_device(kCpu2), "y"));
  auto again_1 = ops::neg(root, on_1);
  auto placed = place(root.graph(), options());
  BOOST_TEST(device_of(placed, on_1) == kCpu1);
  BOOST_TEST(device_of(placed, on_2) == kCpu2);
  BOOST_TEST(device_of(placed, again_1) == kCpu1);
}

BOOST_AUTO_TEST_CASE(a_graph_without_requests_stays_on_the_default_device) {
  auto root = Scope::root();
  auto x = matrix(root, "x");
  auto v = ops::variable(root, ops::constant(root, Tensor::from_vector<float>({1, 2})));
  auto y = ops::matmul(root, x, x);  // a GPU kernel exists, but the inputs are on the CPU
  ops::neg(root, ops::sum(root, y));
  (void)v;
  auto placed = place(root.graph(), options());
  for (int id = 0; id < root.graph().size(); ++id)
    BOOST_TEST(placed[id] == kCpu0, root.graph().node(id).describe() << " is on " << placed[id]);
}

BOOST_AUTO_TEST_CASE(the_alternate_policy_spreads_a_chain_but_keeps_colocated_and_requested_nodes) {
  auto root = Scope::root();
  std::vector<Output> chain{matrix(root, "x")};
  for (int i = 0; i < 6; ++i) chain.push_back(ops::neg(root, chain.back()));
  auto v = ops::variable(root.with_op_name("v"), Shape{100, 100}, DType::float32);
  auto set = ops::assign(root, v, chain.back());
  auto read = ops::read_variable(root, v);
  auto pinned = ops::exp(root.with_device(kPs0), read);
  auto follower = ops::square(root.colocate_with(pinned), chain[2]);
  auto placed = place(root.graph(), options(PlacementOptions::Policy::alternate));
  std::set<std::string> used;
  for (std::size_t i = 0; i < chain.size(); ++i) {
    used.insert(device_of(placed, chain[i]));
    if (i > 0) BOOST_TEST(device_of(placed, chain[i]) != device_of(placed, chain[i - 1]));
  }
  BOOST_TEST((used == std::set<std::string>{kCpu0, kCpu1, kCpu2}));
  BOOST_TEST(device_of(placed, set) == device_of(placed, v));
  BOOST_TEST(device_of(placed, read) == device_of(placed, v));
  BOOST_TEST(device_of(placed, pinned) == kPs0);
  BOOST_TEST(device_of(placed, follower) == kPs0);
}

BOOST_AUTO_TEST_CASE(a_next_iteration_goes_with_its_merge) {
  auto root = Scope::root();
  auto x = matrix(root, "x");
  using Vars = std::vector<Output>;
  ops::while_loop(
      root.with_device(kCpu2),
      [](const Scope& s, const Vars& v) { return ops::less(s, v[0], ops::constant(s, 3)); },
      [](const Scope& s, const Vars& v) { return Vars{ops::add(s, v[0], ops::constant(s, 1)), ops::neg(s, v[1])}; },
      {ops::constant(root, 0), x});
  Graph& g = root.graph();
  int next_iterations = 0;
  for (int id = 0; id < g.size(); ++id)
    if (g.node(id).op == "NextIteration") {
      g.node(id).requested_device = kCpu1;  // yields to its Merge's request
      ++next_iterations;
    }
  BOOST_TEST(next_iterations == 2);
  for (auto policy : {PlacementOptions::Policy::cost, PlacementOptions::Policy::alternate}) {
    auto placed = place(g, options(policy));
    for (int id = 0; id < g.size(); ++id)
      if (g.node(id).op == "Merge") {
        const Node& next = g.node(g.node(id).inputs[1].node);
        BOOST_TEST(next.op == "NextIteration");
        BOOST_TEST(placed[next.id] == placed[id], next.describe() << " is on " << placed[next.id]);
        BOOST_TEST(placed[id] == kCpu2);
      }
  }
}

BOOST_AUTO_TEST_CASE(stack_push_and_stack_pop_of_one_stack_share_a_device) {
  auto root = Scope::root();
  auto h0 = ops::placeholder(root.with_op_name("h0"), DType::float32, Shape{2, 3});
  auto w = ops::placeholder(root.with_op_name("w"), DType::float32, Shape{3, 3});
  using Vars = std::vector<Output>;
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], ops::constant(s, 4)); },
      [&](const Scope& s, const Vars& v) { return Vars{ops::add(s, v[0], ops::constant(s, 1)), ops::tanh(s, ops::matmul(s, v[1], w))}; },
      {ops::constant(root, 0), h0});
  gradients(root, {ops::sum(root, ops::square(root, out[1]))}, {w, h0});
  const Graph& g = root.graph();
  auto placed = place(g, options(PlacementOptions::Policy::alternate));
  std::map<std::string, std::set<std::string>> devices_of_stack;
  int pops = 0;
  for (int id = 0; id < g.size(); ++id)
    if (g.node(id).op == "StackPush" || g.node(id).op == "StackPop") {
      devices_of_stack[get_attr<std::string>(g.node(id).attrs, "stack_name", g.node(id).name)].insert(placed[id]);
      pops += g.node(id).op == "StackPop";
    }
  BOOST_TEST(pops >= 2);
  for (auto& [stack, devices] : devices_of_stack) BOOST_TEST(devices.size() == 1u, stack);
  std::set<std::string> all;
  for (auto& d : placed) all.insert(d);
  BOOST_TEST(all.size() > 1u);  // the alternate policy did spread the rest
}

BOOST_AUTO_TEST_CASE(troupe_placement_names_the_policy) {
  ::unsetenv("TROUPE_PLACEMENT");
  BOOST_TEST(int(placement_policy_from_environment()) == int(PlacementOptions::Policy::cost));
  ::setenv("TROUPE_PLACEMENT", "alternate", 1);
  BOOST_TEST(int(placement_policy_from_environment()) == int(PlacementOptions::Policy::alternate));
  ::setenv("TROUPE_PLACEMENT", "sideways", 1);
  auto message = error_of([] { placement_policy_from_environment(); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(message, "'sideways'"), message);
  ::unsetenv("TROUPE_PLACEMENT");
}
