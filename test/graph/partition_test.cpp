// Partitioning (graph/partition.hpp): a placed graph cut into one graph per device, in the
// manner of TensorFlow's graph_partition_test. Small graphs built with the op builders and
// placed over two CPUs (by requests, or by hand), then the partitions' nodes, edges and
// rendezvous keys are checked: Send/Recv pairs, copied constants, control edges carried by
// dummies, per-device control loops for loops and nested loops, conds, GraphDef round trips,
// and the back edge that must not cross devices.
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <map>

#include "graph/graph_def.hpp"
#include "graph/partition.hpp"
#include "graph/placement.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

using Vars = std::vector<Output>;

const std::string kCpu0 = "/job:localhost/task:0/device:CPU:0";
const std::string kCpu1 = "/job:localhost/task:0/device:CPU:1";

// Requests honoured; unconstrained nodes follow their inputs, else CPU:0.
std::vector<std::string> placed(const Scope& root) { return place(root.graph(), {.devices = {kCpu0, kCpu1}}); }

Output i32(const Scope& s, int32_t v) { return ops::constant(s, v); }

const Partition& part_on(const Partitions& cut, const std::string& device) {
  auto it = std::find_if(cut.parts.begin(), cut.parts.end(), [&](const Partition& p) { return p.device == device; });
  BOOST_REQUIRE_MESSAGE(it != cut.parts.end(), "no partition for " << device);
  return *it;
}

const Node& named(const Graph& g, const std::string& name) {
  const Node* n = g.find(name);
  BOOST_REQUIRE_MESSAGE(n, "no node '" << name << "'");
  return *n;
}

std::vector<const Node*> with_op(const Graph& g, const std::string& op) {
  std::vector<const Node*> out;
  for (int id = 0; id < g.size(); ++id)
    if (g.node(id).op == op) out.push_back(&g.node(id));
  return out;
}

// Where node `id` of the placed graph went: its copy in its partition.
const Node& moved(const Partitions& cut, int id) {
  auto [part, node] = cut.of.at(std::size_t(id));
  BOOST_REQUIRE(part >= 0);
  return cut.parts[std::size_t(part)].graph->node(node);
}
const Node& moved(const Partitions& cut, const Output& x) { return moved(cut, x.node()->id); }

const std::string& string_attr(const Node& n, const std::string& name) {
  return get_attr<std::string>(n.attrs, name, n.name);
}

// The transfers of `tensor` ("node:port", "^node") in a partition.
std::vector<const Node*> transfers(const Graph& g, const std::string& op, const std::string& tensor) {
  std::vector<const Node*> out;
  for (const Node* n : with_op(g, op))
    if (string_attr(*n, "tensor_name") == tensor) out.push_back(n);
  return out;
}

const Node& one_transfer(const Partition& part, const std::string& op, const std::string& tensor) {
  auto found = transfers(*part.graph, op, tensor);
  BOOST_REQUIRE_MESSAGE(found.size() == 1, found.size() << " " << op << " of " << tensor << " on " << part.device);
  return *found[0];
}

std::size_t count_op(const Partitions& cut, const std::string& op) {
  std::size_t n = 0;
  for (const Partition& p : cut.parts) n += with_op(*p.graph, op).size();
  return n;
}

// Every _Send has exactly one _Recv with its key, on the partition of its recv_device, and the
// other way round; each sits on its own device.
void expect_paired(const Partitions& cut) {
  std::map<std::string, int> sends, recvs;
  for (const Partition& p : cut.parts) {
    for (const Node* n : with_op(*p.graph, "_Send")) {
      ++sends[rendezvous_key(*n)];
      BOOST_TEST(string_attr(*n, "send_device") == p.device, n->name);
      BOOST_TEST(n->requested_device == p.device, n->name);
    }
    for (const Node* n : with_op(*p.graph, "_Recv")) {
      ++recvs[rendezvous_key(*n)];
      BOOST_TEST(string_attr(*n, "recv_device") == p.device, n->name);
      BOOST_TEST(n->requested_device == p.device, n->name);
    }
  }
  for (auto& [key, count] : sends) BOOST_TEST((count == 1 && recvs.count(key) && recvs[key] == 1), key);
  for (auto& [key, count] : recvs) BOOST_TEST((count == 1 && sends.count(key)), key);
}

// Every _Send and _Recv works in the frame of the value it carries (the producer's, named
// by its tensor_name in the placed graph).
void expect_transfers_in_producer_frame(const Graph& g, const Partitions& cut) {
  for (const Partition& p : cut.parts)
    for (const std::string op : {"_Send", "_Recv"})
      for (const Node* n : with_op(*p.graph, op)) {
        const Node& producer = named(g, parse_tensor_name(string_attr(*n, "tensor_name")).node);
        BOOST_TEST(loop_frame(*n) == loop_frame(producer), n->name);
      }
}

// A loop's NextIteration is in the partition of the Merge it feeds, and feeds its copy there.
void expect_back_edges_local(const Graph& g, const Partitions& cut) {
  auto edges = g.out_edges();
  int seen = 0;
  for (const Node* next : with_op(g, "NextIteration"))
    for (const Consumer& c : edges.data[std::size_t(next->id)][0]) {
      ++seen;
      BOOST_TEST(cut.of[std::size_t(c.node)].part == cut.of[std::size_t(next->id)].part, next->name);
      BOOST_TEST((moved(cut, c.node).inputs.at(std::size_t(c.slot)) == Endpoint{cut.of[std::size_t(next->id)].node, 0}),
                 next->name);
    }
  BOOST_TEST(seen > 0);
}

// The control loop partition() adds for `frame` on one device: one node of each kind.
struct ControlLoop {
  const Node *enter = nullptr, *merge = nullptr, *sw = nullptr, *next = nullptr, *exit = nullptr;
};

ControlLoop control_loop(const Partition& part, const std::string& frame) {
  const std::string prefix = frame + "/_control_loop/";
  std::map<std::string, std::vector<const Node*>> by_op;
  for (int id = 0; id < part.graph->size(); ++id) {
    const Node& n = part.graph->node(id);
    if (n.name.rfind(prefix, 0) == 0) by_op[n.op].push_back(&n);
  }
  ControlLoop cl;
  for (auto [op, slot] : {std::pair{"Enter", &cl.enter}, std::pair{"Merge", &cl.merge}, std::pair{"Switch", &cl.sw},
                          std::pair{"NextIteration", &cl.next}, std::pair{"Exit", &cl.exit}}) {
    BOOST_REQUIRE_MESSAGE(by_op[op].size() == 1,
                          by_op[op].size() << " " << op << " in the control loop of '" << frame << "' on " << part.device);
    *slot = by_op[op][0];
  }
  // The loop of Enter -> Merge -> Switch -> NextIteration -> Merge, and Switch -> Exit.
  BOOST_TEST(get_attr<std::string>(cl.enter->attrs, "frame_name", cl.enter->name) == frame);
  BOOST_TEST((cl.merge->inputs == std::vector<Endpoint>{{cl.enter->id, 0}, {cl.next->id, 0}}));
  BOOST_TEST((cl.sw->inputs.at(0) == Endpoint{cl.merge->id, 0}));
  BOOST_TEST((cl.next->inputs == std::vector<Endpoint>{{cl.sw->id, 1}}));
  BOOST_TEST((cl.exit->inputs == std::vector<Endpoint>{{cl.sw->id, 0}, cl.sw->inputs.at(1)}));
  for (const Node* n : {cl.enter, cl.merge, cl.sw, cl.next}) BOOST_TEST(loop_frame(*n) == frame, n->name);
  BOOST_TEST(cl.enter->requested_device == part.device);
  return cl;
}

bool has_control_input(const Node& n, int from) {
  return std::find(n.control_inputs.begin(), n.control_inputs.end(), from) != n.control_inputs.end();
}

// Every _Recv inside a frame that has a control loop on its device waits for that control
// loop: for its Enter where the value is a (non-constant) Enter's, which comes in iteration 0
// only, else for its Merge.
void expect_recvs_gated(const Graph& g, const Partitions& cut, const std::vector<std::string>& frames) {
  for (const Partition& p : cut.parts)
    for (const Node* r : with_op(*p.graph, "_Recv")) {
      const std::string& frame = loop_frame(*r);
      if (std::find(frames.begin(), frames.end(), frame) == frames.end()) continue;
      ControlLoop cl = control_loop(p, frame);
      const Node& producer = named(g, parse_tensor_name(string_attr(*r, "tensor_name")).node);
      const bool from_enter = producer.op == "Enter" && !get_attr_or<bool>(producer.attrs, "is_constant", false) &&
                              string_attr(*r, "tensor_name")[0] != '^';
      BOOST_TEST(has_control_input(*r, from_enter ? cl.enter->id : cl.merge->id), r->name << " on " << p.device);
    }
}

std::vector<std::string> input_names(const Graph& g, const Node& n) {
  std::vector<std::string> out;
  for (const Endpoint& in : n.inputs) out.push_back(tensor_name(g.node(in.node), in.port));
  for (int c : n.control_inputs) out.push_back("^" + g.node(c).name);
  return out;
}

// The same nodes by name: ops, inputs, control inputs, attributes and output types and shapes.
void expect_same_nodes(const Graph& a, const Graph& b) {
  BOOST_TEST(a.size() == b.size());
  for (int id = 0; id < a.size(); ++id) {
    const Node& x = a.node(id);
    const Node& y = named(b, x.name);
    BOOST_TEST(x.op == y.op, x.name);
    BOOST_TEST(input_names(a, x) == input_names(b, y), boost::test_tools::per_element());
    BOOST_TEST(x.attrs.size() == y.attrs.size(), x.name);
    for (auto& [name, value] : x.attrs)
      BOOST_TEST((y.attrs.count(name) && attr_equal(value, y.attrs.at(name))), x.name << " attr " << name);
    BOOST_TEST(x.output_types == y.output_types, boost::test_tools::per_element());
    for (int port = 0; port < x.num_outputs() && port < y.num_outputs(); ++port)
      BOOST_TEST(x.output_shapes[std::size_t(port)].to_string() == y.output_shapes[std::size_t(port)].to_string(),
                 x.name << ":" << port);
  }
}

void expect_round_trips(const Partitions& cut) {
  for (const Partition& p : cut.parts) {
    auto bytes = graph_to_bytes(*p.graph);
    auto copy = graph_from_bytes(bytes.data(), bytes.size(), "the partition for " + p.device);
    expect_same_nodes(*p.graph, *copy);
    for (int id = 0; id < p.graph->size(); ++id)
      BOOST_TEST(named(*copy, p.graph->node(id).name).requested_device == p.device);
  }
}

// sum over i in [0, n) of 2 i: the doubling ("twice") on CPU:1, the rest on CPU:0.
struct SplitLoop {
  Scope root = Scope::root();
  Output n = ops::placeholder(root.with_op_name("n"), DType::int32, Shape{});
  Output twice;
  Vars out = ops::while_loop(
      root, [&](const Scope& s, const Vars& v) { return ops::less(s, v[0], n); },
      [&](const Scope& s, const Vars& v) {
        twice = ops::mul(s.with_device(kCpu1).with_op_name("twice"), v[0], i32(s, 2));
        return Vars{ops::add(s, v[0], i32(s, 1)), ops::add(s, v[1], twice)};
      },
      {i32(root, 0), i32(root, 0)});
  std::string frame() const { return loop_frame(*twice.node()); }
};

// for i in [0, 3): for j in [0, i): total += m, the addition of m ("add_m") on CPU:1.
struct SplitNestedLoop {
  Scope root = Scope::root();
  Output m = ops::placeholder(root.with_op_name("m"), DType::int32, Shape{});
  Output add_m, inner_exit;
  Vars out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 3)); },
      [&](const Scope& s, const Vars& outer) {
        Output i = outer[0];
        auto inner = ops::while_loop(
            s, [&](const Scope& t, const Vars& v) { return ops::less(t, v[0], i); },
            [&](const Scope& t, const Vars& v) {
              add_m = ops::add(t.with_device(kCpu1).with_op_name("add_m"), v[1], m);
              return Vars{ops::add(t, v[0], i32(t, 1)), add_m};
            },
            {i32(s, 0), outer[1]}, {.name = "inner"});
        inner_exit = inner[1];
        return Vars{ops::add(s, i, i32(s, 1)), inner[1]};
      },
      {i32(root, 0), i32(root, 0)}, {.name = "outer"});
  std::string inner_frame() const { return loop_frame(*add_m.node()); }
  std::string outer_frame() const { return loop_frame(*inner_exit.node()); }  // an Exit leaves to it
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_graph_on_one_device_is_its_own_partition_not_a_copy) {
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, Shape{2});
  auto y = ops::neg(root.with_op_name("y"), x);
  auto graph = root.graph_ptr();
  const std::vector<std::string> device_of(std::size_t(graph->size()), kCpu1);
  Partitions cut = partition(graph, device_of);
  BOOST_TEST_REQUIRE(cut.parts.size() == 1u);
  BOOST_TEST(cut.parts[0].device == kCpu1);
  BOOST_TEST(cut.parts[0].graph == graph, "the graph itself");
  BOOST_TEST(count_op(cut, "_Send") + count_op(cut, "_Recv") == 0);
  for (int id = 0; id < graph->size(); ++id) {
    BOOST_TEST(graph->node(id).requested_device == kCpu1, "every node requests its device, as in a copy");
    BOOST_TEST(cut.of[std::size_t(id)].part == 0);
    BOOST_TEST(cut.of[std::size_t(id)].node == id);
  }
  BOOST_TEST((graph->node(y.node()->id).inputs == std::vector<Endpoint>{{x.node()->id, 0}}));

  // Over two devices the same overload cuts a copy, as partition(const Graph&, ...) does.
  auto z = ops::exp(root.with_op_name("z"), y);
  std::vector<std::string> two(std::size_t(graph->size()), kCpu0);
  two[std::size_t(z.node()->id)] = kCpu1;
  Partitions cut2 = partition(graph, two);
  BOOST_TEST(cut2.parts.size() == 2u);
  BOOST_TEST(cut2.parts[0].graph != graph);
  BOOST_TEST(count_op(cut2, "_Send") == 1);
}

BOOST_AUTO_TEST_CASE(a_cross_device_edge_becomes_one_send_recv_pair_shared_by_the_consumers_on_that_device) {
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_device(kCpu0).with_op_name("x"), DType::float32, Shape{2, 3});
  auto a = ops::neg(root.with_device(kCpu1).with_op_name("a"), x);
  auto b = ops::square(root.with_device(kCpu1).with_op_name("b"), x);
  auto c = ops::exp(root.with_device(kCpu0).with_op_name("c"), x);
  Partitions cut = partition(root.graph(), placed(root));

  BOOST_REQUIRE(cut.parts.size() == 2);
  BOOST_TEST(cut.parts[0].device == kCpu0, "partitions in order of first node");
  BOOST_TEST(cut.parts[1].device == kCpu1);
  const Partition& cpu0 = part_on(cut, kCpu0);
  const Partition& cpu1 = part_on(cut, kCpu1);
  BOOST_TEST(count_op(cut, "_Send") == 1);
  BOOST_TEST(count_op(cut, "_Recv") == 1);

  const Node& send = one_transfer(cpu0, "_Send", "x:0");
  const Node& recv = one_transfer(cpu1, "_Recv", "x:0");
  BOOST_TEST((send.inputs == std::vector<Endpoint>{{moved(cut, x).id, 0}}));
  BOOST_TEST(rendezvous_key(send) == kCpu0 + ";" + kCpu1 + ";x:0");
  BOOST_TEST(rendezvous_key(recv) == rendezvous_key(send));
  BOOST_TEST(get_attr<DType>(recv.attrs, "dtype", recv.name) == DType::float32);
  BOOST_TEST(get_attr<PartialShape>(recv.attrs, "shape", recv.name).to_string() == "[2,3]");
  BOOST_TEST(recv.output_shapes.at(0).to_string() == "[2,3]");
  BOOST_TEST(recv.control_inputs.empty(), "outside any loop a Recv waits for nothing");

  // Both consumers on CPU:1 read the one Recv; the consumer on CPU:0 reads x itself.
  BOOST_TEST((moved(cut, a).inputs == std::vector<Endpoint>{{recv.id, 0}}));
  BOOST_TEST((moved(cut, b).inputs == std::vector<Endpoint>{{recv.id, 0}}));
  BOOST_TEST((moved(cut, c).inputs == std::vector<Endpoint>{{moved(cut, x).id, 0}}));
  BOOST_TEST(cut.of[std::size_t(a.node()->id)].part == 1);
  BOOST_TEST(moved(cut, a).name == "a");
  BOOST_TEST(moved(cut, a).requested_device == kCpu1);
  BOOST_TEST(!cpu1.graph->has_name("x"));
  expect_paired(cut);
}

BOOST_AUTO_TEST_CASE(a_constant_read_on_another_device_is_copied_not_sent) {
  auto root = Scope::root();
  auto k = ops::constant(root.with_device(kCpu0).with_op_name("k"), Tensor::from_vector<float>({1, 2, 3}));
  auto y = ops::neg(root.with_device(kCpu1).with_op_name("y"), k);
  auto z = ops::square(root.with_device(kCpu0).with_op_name("z"), k);
  Partitions cut = partition(root.graph(), placed(root));

  BOOST_REQUIRE(cut.parts.size() == 2);
  BOOST_TEST(count_op(cut, "_Send") == 0);
  BOOST_TEST(count_op(cut, "_Recv") == 0);
  const Node& copy = named(*part_on(cut, kCpu1).graph, "k");
  BOOST_TEST(copy.op == "Const");
  BOOST_TEST(copy.requested_device == kCpu1);
  BOOST_TEST(attr_equal(copy.attrs.at("value"), k.node()->attrs.at("value")));
  BOOST_TEST((moved(cut, y).inputs == std::vector<Endpoint>{{copy.id, 0}}));
  BOOST_TEST((moved(cut, z).inputs == std::vector<Endpoint>{{moved(cut, k).id, 0}}));
  BOOST_TEST(cut.of[std::size_t(k.node()->id)].part == 0, "the placed Const itself stays on its device");
}

BOOST_AUTO_TEST_CASE(a_constant_that_waits_for_a_control_input_is_sent_not_copied) {
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_device(kCpu0).with_op_name("x"), DType::float32, Shape{});
  auto late = ops::constant(root.with_device(kCpu0).with_control_dependencies({x}).with_op_name("late"), 1.0f);
  auto y = ops::neg(root.with_device(kCpu1).with_op_name("y"), late);
  Partitions cut = partition(root.graph(), placed(root));

  BOOST_TEST(!part_on(cut, kCpu1).graph->has_name("late"));
  const Node& recv = one_transfer(part_on(cut, kCpu1), "_Recv", "late:0");
  one_transfer(part_on(cut, kCpu0), "_Send", "late:0");
  BOOST_TEST((moved(cut, y).inputs == std::vector<Endpoint>{{recv.id, 0}}));
  expect_paired(cut);
}

BOOST_AUTO_TEST_CASE(a_control_edge_across_devices_is_carried_by_a_dummy_tensor) {
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_device(kCpu0).with_op_name("x"), DType::float32, Shape{});
  auto a = ops::neg(root.with_device(kCpu0).with_op_name("a"), x);
  auto y = ops::placeholder(root.with_device(kCpu1).with_op_name("y"), DType::float32, Shape{});
  auto b = ops::neg(root.with_device(kCpu1).with_control_dependencies({a}).with_op_name("b"), y);
  Partitions cut = partition(root.graph(), placed(root));

  const Partition& cpu0 = part_on(cut, kCpu0);
  const Partition& cpu1 = part_on(cut, kCpu1);
  const Node& send = one_transfer(cpu0, "_Send", "^a");
  const Node& recv = one_transfer(cpu1, "_Recv", "^a");
  BOOST_TEST(rendezvous_key(send) == kCpu0 + ";" + kCpu1 + ";^a");
  BOOST_TEST(rendezvous_key(recv) == rendezvous_key(send));

  // The source's device: a Const that waits for `a` feeds the Send.
  BOOST_REQUIRE(send.inputs.size() == 1);
  const Node& dummy = cpu0.graph->node(send.inputs[0].node);
  BOOST_TEST(dummy.op == "Const");
  BOOST_TEST((dummy.control_inputs == std::vector<int>{moved(cut, a).id}));
  BOOST_TEST(dummy.requested_device == kCpu0);
  BOOST_TEST(!is_constant_value(dummy), "the dummy must not be hoisted or copied");

  // The destination: the Recv of the dummy is b's control input, in place of a.
  BOOST_TEST(get_attr<DType>(recv.attrs, "dtype", recv.name) == DType::int32);
  BOOST_TEST((moved(cut, b).control_inputs == std::vector<int>{recv.id}));
  BOOST_TEST((moved(cut, b).inputs == std::vector<Endpoint>{{moved(cut, y).id, 0}}));
  BOOST_TEST(count_op(cut, "_Send") == 1);
  expect_paired(cut);
}

BOOST_AUTO_TEST_CASE(a_loop_spanning_two_devices_gets_a_control_loop_on_each) {
  SplitLoop l;
  const std::string frame = l.frame();
  BOOST_REQUIRE(!frame.empty());
  const Graph& g = l.root.graph();
  Partitions cut = partition(g, placed(l.root));

  BOOST_REQUIRE(cut.parts.size() == 2);
  BOOST_TEST(cut.of[std::size_t(l.twice.node()->id)].part == 1);
  auto loop_conds = with_op(g, "LoopCond");
  BOOST_REQUIRE(loop_conds.size() == 1);
  const Node& lc = *loop_conds[0];
  BOOST_REQUIRE(cut.of[std::size_t(lc.id)].part == 0);

  ControlLoop on0 = control_loop(part_on(cut, kCpu0), frame);
  ControlLoop on1 = control_loop(part_on(cut, kCpu1), frame);
  // The LoopCond drives its own device's control loop directly, the other's through a Recv.
  BOOST_TEST((on0.sw->inputs.at(1) == Endpoint{moved(cut, lc.id).id, 0}));
  const Node& pred = part_on(cut, kCpu1).graph->node(on1.sw->inputs.at(1).node);
  BOOST_TEST(pred.op == "_Recv");
  BOOST_TEST(string_attr(pred, "tensor_name") == lc.name + ":0");
  BOOST_TEST(string_attr(pred, "send_device") == kCpu0);
  BOOST_TEST(get_attr<DType>(pred.attrs, "dtype", pred.name) == DType::boolean);
  one_transfer(part_on(cut, kCpu0), "_Send", lc.name + ":0");
  // An outermost control loop enters from a Const of its own, and leaves to the top level.
  for (auto [part, cl] : {std::pair{&part_on(cut, kCpu0), on0}, std::pair{&part_on(cut, kCpu1), on1}}) {
    const Node& start = part->graph->node(cl.enter->inputs.at(0).node);
    BOOST_TEST(start.op == "Const");
    BOOST_TEST(loop_frame(start).empty());
    BOOST_TEST(loop_frame(*cl.exit).empty());
  }

  // The body's values cross both ways inside the frame.
  std::size_t in_frame = 0;
  for (const Partition& p : cut.parts)
    for (const Node* s : with_op(*p.graph, "_Send")) in_frame += loop_frame(*s) == frame;
  BOOST_TEST(in_frame >= 3, "the condition, twice's input and twice's result");
  one_transfer(part_on(cut, kCpu1), "_Send", l.twice.name());
  expect_recvs_gated(g, cut, {frame});
  expect_transfers_in_producer_frame(g, cut);
  expect_back_edges_local(g, cut);
  expect_paired(cut);
}

BOOST_AUTO_TEST_CASE(the_recv_of_an_enters_value_waits_for_the_control_loop_enter) {
  // The accumulator's Merge (with its NextIteration) moved to CPU:1, its Enter left on CPU:0:
  // the Enter's value, which comes in iteration 0 only, crosses over.
  SplitLoop l;
  const Graph& g = l.root.graph();
  const Node& sw = g.node(l.out[1].node()->inputs.at(0).node);
  const Node& merge = g.node(sw.inputs.at(0).node);
  const Node& enter = g.node(merge.inputs.at(0).node);
  const Node& next = g.node(merge.inputs.at(1).node);
  BOOST_REQUIRE(sw.op == "Switch");
  BOOST_REQUIRE(merge.op == "Merge");
  BOOST_REQUIRE(enter.op == "Enter");
  BOOST_REQUIRE(next.op == "NextIteration");
  auto device_of = placed(l.root);
  BOOST_REQUIRE(device_of[std::size_t(enter.id)] == kCpu0);
  device_of[std::size_t(merge.id)] = kCpu1;
  device_of[std::size_t(next.id)] = kCpu1;
  Partitions cut = partition(g, device_of);

  const Partition& cpu1 = part_on(cut, kCpu1);
  ControlLoop cl = control_loop(cpu1, l.frame());
  const Node& recv = one_transfer(cpu1, "_Recv", enter.name + ":0");
  BOOST_TEST((recv.control_inputs == std::vector<int>{cl.enter->id}));
  BOOST_TEST(loop_frame(recv) == l.frame());
  BOOST_TEST((moved(cut, merge.id).inputs.at(0) == Endpoint{recv.id, 0}));
  expect_recvs_gated(g, cut, {l.frame()});
  expect_back_edges_local(g, cut);
  expect_paired(cut);
}

BOOST_AUTO_TEST_CASE(a_nested_loop_spanning_two_devices_enters_from_the_outer_control_loop_on_each_device) {
  SplitNestedLoop l;
  const std::string inner = l.inner_frame(), outer = l.outer_frame();
  BOOST_REQUIRE(!inner.empty());
  BOOST_REQUIRE(!outer.empty());
  BOOST_REQUIRE(inner != outer);
  const Graph& g = l.root.graph();
  Partitions cut = partition(g, placed(l.root));

  BOOST_REQUIRE(cut.parts.size() == 2);
  for (const Partition& p : cut.parts) {
    ControlLoop o = control_loop(p, outer);
    ControlLoop i = control_loop(p, inner);
    BOOST_TEST((i.enter->inputs == std::vector<Endpoint>{{o.merge->id, 0}}), p.device);
    BOOST_TEST(loop_frame(*i.exit) == outer, "the inner control loop leaves to the outer frame");
    BOOST_TEST(p.graph->node(o.enter->inputs.at(0).node).op == "Const");
    // The outer control loop's Exit waits, in every iteration, for the inner one to leave.
    bool waits = false;
    for (int c : o.exit->control_inputs)
      waits = waits || has_control_input(p.graph->node(c), i.exit->id);
    BOOST_TEST(waits, p.device);
  }
  expect_recvs_gated(g, cut, {inner, outer});
  expect_transfers_in_producer_frame(g, cut);
  expect_back_edges_local(g, cut);
  expect_paired(cut);
}

BOOST_AUTO_TEST_CASE(a_cond_whose_branches_live_on_two_devices_sends_the_switch_output_and_merges_a_recv) {
  auto root = Scope::root();
  auto p = ops::placeholder(root.with_op_name("p"), DType::boolean, Shape{});
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, Shape{3});
  Output flip, twice;
  auto out = ops::cond(
      root.with_device(kCpu0), p, {x},
      [&](const Scope& s, const Vars& in) { return Vars{flip = ops::neg(s.with_device(kCpu1), in[0])}; },
      [&](const Scope& s, const Vars& in) { return Vars{twice = ops::square(s, in[0])}; })[0];
  const Graph& g = root.graph();
  Partitions cut = partition(g, placed(root));

  BOOST_REQUIRE(cut.parts.size() == 2);
  BOOST_REQUIRE(cut.of[std::size_t(flip.node()->id)].part == 1);
  BOOST_REQUIRE(cut.of[std::size_t(twice.node()->id)].part == 0);
  BOOST_REQUIRE(cut.of[std::size_t(out.node()->id)].part == 0);
  const Partition& cpu0 = part_on(cut, kCpu0);
  const Partition& cpu1 = part_on(cut, kCpu1);

  // The Switch's true output goes to CPU:1; its false output stays.
  const Node& sw = g.node(flip.node()->inputs.at(0).node);
  BOOST_REQUIRE(sw.op == "Switch");
  BOOST_TEST(flip.node()->inputs.at(0).port == 1);
  const Node& send = one_transfer(cpu0, "_Send", sw.name + ":1");
  BOOST_TEST((send.inputs == std::vector<Endpoint>{{moved(cut, sw.id).id, 1}}));
  BOOST_TEST(transfers(*cpu0.graph, "_Send", sw.name + ":0").empty());
  const Node& recv = one_transfer(cpu1, "_Recv", sw.name + ":1");
  BOOST_TEST(rendezvous_key(recv) == rendezvous_key(send));
  BOOST_TEST((moved(cut, flip).inputs == std::vector<Endpoint>{{recv.id, 0}}));
  BOOST_TEST(get_attr<PartialShape>(recv.attrs, "shape", recv.name).to_string() == "[3]");

  // The then branch's pivot reaches CPU:1 as a control Recv.
  BOOST_REQUIRE(flip.node()->control_inputs.size() == 1);
  const Node& pivot = g.node(flip.node()->control_inputs[0]);
  const Node& pivot_recv = one_transfer(cpu1, "_Recv", "^" + pivot.name);
  BOOST_TEST((moved(cut, flip).control_inputs == std::vector<int>{pivot_recv.id}));

  // The Merge reads the else branch directly and the then branch through a Recv.
  const Node& merge = moved(cut, out);
  BOOST_REQUIRE(merge.inputs.size() == 2);
  BOOST_TEST((merge.inputs[0] == Endpoint{moved(cut, twice).id, 0}));
  const Node& result = cpu0.graph->node(merge.inputs[1].node);
  BOOST_TEST(result.op == "_Recv");
  BOOST_TEST(string_attr(result, "tensor_name") == flip.node()->name + ":0");
  BOOST_TEST(string_attr(result, "send_device") == kCpu1);
  BOOST_TEST(count_op(cut, "Enter") == 0, "no loop, no control loop");
  expect_paired(cut);
}

BOOST_AUTO_TEST_CASE(every_partition_round_trips_through_its_graph_def) {
  {
    SplitNestedLoop l;
    Partitions cut = partition(l.root.graph(), placed(l.root));
    BOOST_REQUIRE(cut.parts.size() == 2);
    expect_round_trips(cut);
  }
  {
    SplitLoop l;
    expect_round_trips(partition(l.root.graph(), placed(l.root)));
  }
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_device(kCpu0).with_op_name("x"), DType::float32, Shape{2});
  auto k = ops::constant(root.with_device(kCpu0).with_op_name("k"), Tensor::from_vector<float>({1, 2}));
  auto a = ops::add(root.with_device(kCpu1).with_control_dependencies({x}), x, k);
  ops::neg(root.with_device(kCpu0), a);
  expect_round_trips(partition(root.graph(), placed(root)));
}

BOOST_AUTO_TEST_CASE(a_graph_on_one_device_gives_one_partition_with_the_same_nodes) {
  auto root = Scope::root();
  auto n = ops::placeholder(root.with_op_name("n"), DType::int32, Shape{});
  auto out = ops::while_loop(
      root, [&](const Scope& s, const Vars& v) { return ops::less(s, v[0], n); },
      [](const Scope& s, const Vars& v) {
        auto term = ops::cond(
            s, ops::less(s, v[0], i32(s, 5)), {v[0]},
            [](const Scope& b, const Vars& in) { return Vars{ops::mul(b, in[0], i32(b, 2))}; },
            [](const Scope& b, const Vars& in) { return Vars{ops::identity(b, in[0])}; })[0];
        return Vars{ops::add(s, v[0], i32(s, 1)), ops::add(s, v[1], term)};
      },
      {i32(root, 0), i32(root, 0)});
  ops::neg(root.with_control_dependencies({out[0]}), out[1]);
  const Graph& g = root.graph();
  Partitions cut = partition(g, std::vector<std::string>(std::size_t(g.size()), kCpu0));

  BOOST_REQUIRE(cut.parts.size() == 1);
  BOOST_TEST(cut.parts[0].device == kCpu0);
  expect_same_nodes(g, *cut.parts[0].graph);
  for (int id = 0; id < g.size(); ++id) {
    BOOST_TEST(cut.of[std::size_t(id)].part == 0);
    BOOST_TEST(moved(cut, id).name == g.node(id).name);
    BOOST_TEST(moved(cut, id).requested_device == kCpu0);
  }
  BOOST_TEST(count_op(cut, "_Send") == 0);
  BOOST_TEST(count_op(cut, "_Recv") == 0);
}

BOOST_AUTO_TEST_CASE(a_back_edge_across_devices_fails_naming_both_nodes) {
  auto root = Scope::root();
  auto out = ops::while_loop(
      root, [](const Scope& s, const Vars& v) { return ops::less(s, v[0], i32(s, 3)); },
      [](const Scope& s, const Vars& v) { return Vars{ops::add(s, v[0], i32(s, 1))}; }, {i32(root, 0)});
  const Graph& g = root.graph();
  std::vector<std::string> device_of(std::size_t(g.size()), kCpu0);
  auto nexts = with_op(g, "NextIteration");
  BOOST_REQUIRE(nexts.size() == 1);
  device_of[std::size_t(nexts[0]->id)] = kCpu1;
  const Node& merge = g.node(g.out_edges().data[std::size_t(nexts[0]->id)][0].at(0).node);
  BOOST_REQUIRE(merge.op == "Merge");

  auto message = error_of([&] { partition(g, device_of); }, ErrorCode::internal);
  BOOST_TEST(contains(message, merge.describe()), message);
  BOOST_TEST(contains(message, nexts[0]->describe()), message);
  BOOST_TEST(contains(message, kCpu0), message);
  BOOST_TEST(contains(message, kCpu1), message);
}

BOOST_AUTO_TEST_CASE(a_device_list_of_the_wrong_length_is_refused) {
  auto root = Scope::root();
  ops::neg(root, ops::placeholder(root, DType::float32, Shape{}));
  auto message = error_of([&] { partition(root.graph(), {kCpu0}); }, ErrorCode::internal);
  BOOST_TEST(contains(message, "1 devices for 2 nodes"), message);
}
