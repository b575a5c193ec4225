#include <boost/test/unit_test.hpp>

#include "graph/graph.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;

BOOST_AUTO_TEST_CASE(scopes_prefix_names_and_keep_them_unique) {
  auto root = Scope::root();
  auto a = ops::constant(root, 1.0f);
  auto b = ops::constant(root, 2.0f);
  BOOST_TEST(a.node()->name == "Const");
  BOOST_TEST(b.node()->name == "Const_1");
  auto layer = root.sub("layer");
  auto c = ops::add(layer, a, b);
  BOOST_TEST(c.node()->name == "layer/Add");
  auto layer2 = root.sub("layer");
  BOOST_TEST(ops::add(layer2, a, b).node()->name == "layer_1/Add");
  BOOST_TEST(ops::add(root.with_op_name("sum"), a, b).node()->name == "sum");
  BOOST_TEST(c.name() == "layer/Add:0");
}

BOOST_AUTO_TEST_CASE(a_device_scope_is_recorded_on_its_nodes) {
  auto root = Scope::root();
  auto x = ops::constant(root.with_device("/device:GPU:0"), 1.0f);
  BOOST_TEST(x.node()->requested_device == "/device:GPU:0");
  BOOST_TEST(ops::neg(root, x).node()->requested_device.empty());
}

BOOST_AUTO_TEST_CASE(control_dependencies_become_control_inputs) {
  auto root = Scope::root();
  auto a = ops::constant(root, 1.0f);
  auto b = ops::constant(root, 2.0f);
  auto c = ops::neg(root.with_control_dependencies(std::vector<Output>{a, b}), b);
  BOOST_TEST(c.node()->control_inputs.size() == 2u);
  auto edges = root.graph().out_edges();
  BOOST_TEST(edges.control[a.node()->id].size() == 1u);
  BOOST_TEST(edges.data[b.node()->id][0].size() == 1u);
}

BOOST_AUTO_TEST_CASE(shape_inference_gives_dtypes_and_partial_shapes) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, {-1, 784});
  auto w = ops::constant(root, Tensor::zeros(DType::float32, {784, 10}));
  auto y = ops::matmul(root, x, w);
  BOOST_TEST(y.dtype() == DType::float32);
  BOOST_TEST(y.shape().to_string() == "[?,10]");
  BOOST_TEST(ops::sum(root, y, std::vector<int64_t>{1}).shape().to_string() == "[?]");
  BOOST_TEST(ops::reshape(root, w, {-1}).shape().to_string() == "[7840]");
  BOOST_TEST(ops::less(root, y, y).dtype() == DType::boolean);
}

BOOST_AUTO_TEST_CASE(a_matmul_of_mismatched_matrices_is_refused_when_built) {
  auto root = Scope::root();
  auto a = ops::placeholder(root, DType::float32, {64, 784});
  auto b = ops::placeholder(root, DType::float32, {700, 10});
  try {
    ops::matmul(root.with_op_name("dense1/matmul"), a, b);
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    std::string m = e.what();
    BOOST_TEST(contains(m, "MatMul 'dense1/matmul'"));
    BOOST_TEST(contains(m, "[64,784]"));
    BOOST_TEST(contains(m, "[700,10]"));
  }
  BOOST_TEST(!root.graph().has_name("dense1/matmul"));
}

BOOST_AUTO_TEST_CASE(every_node_is_found_by_its_name_and_a_second_node_of_a_name_is_refused) {
  // Past several growths of the name index, and in a graph reserved ahead.
  for (int reserved : {0, 3000}) {
    Graph g;
    if (reserved) g.reserve(reserved);
    for (int i = 0; i < 3000; ++i)
      g.add_node(NodeSpec{.name = "n/" + std::to_string(i), .op = "NoOp"});
    for (int i = 0; i < 3000; i += 7) {
      const Node* n = g.find("n/" + std::to_string(i));
      BOOST_TEST_REQUIRE(n != nullptr, "n/" << i);
      BOOST_TEST(n->id == i);
    }
    BOOST_TEST(g.find("n/3000") == nullptr);
    BOOST_TEST(!g.has_name("n"));
    try {
      g.add_node(NodeSpec{.name = "n/1234", .op = "NoOp"});
      BOOST_FAIL("expected an error");
    } catch (const Error& e) {
      BOOST_TEST(e.code() == ErrorCode::already_exists);
      BOOST_TEST(contains(e.what(), "a node named 'n/1234' is already in the graph"));
    }
    BOOST_TEST(g.size() == 3000);
  }
}

BOOST_AUTO_TEST_CASE(inputs_of_mixed_dtypes_are_refused_when_built) {
  auto root = Scope::root();
  auto a = ops::constant(root, 1.0f);
  auto b = ops::constant(root, 1.0);
  BOOST_CHECK_THROW(ops::add(root, a, b), Error);
}

BOOST_AUTO_TEST_CASE(an_output_of_another_graph_is_refused) {
  auto g1 = Scope::root();
  auto g2 = Scope::root();
  auto a = ops::constant(g1, 1.0f);
  ops::constant(g2, 1.0f);
  BOOST_CHECK_THROW(ops::neg(g2, a), Error);
}

BOOST_AUTO_TEST_CASE(tensor_names_parse_with_and_without_port) {
  auto p = parse_tensor_name("layer/add:1");
  BOOST_TEST(p.node == "layer/add");
  BOOST_TEST(p.port == 1);
  BOOST_TEST(!p.control);
  BOOST_TEST(parse_tensor_name("x").port == 0);
  BOOST_TEST(parse_tensor_name("^init").control);
  BOOST_CHECK_THROW(parse_tensor_name(""), Error);
}

namespace {
// Each node's place in the graph's topological order.
std::vector<int> places_in_order(const Graph& g) {
  auto order = g.topological_order();
  BOOST_TEST_REQUIRE(int(order.size()) == g.size());
  std::vector<int> pos(order.size());
  for (std::size_t i = 0; i < order.size(); ++i) pos[order[i]] = int(i);
  return pos;
}
}  // namespace

BOOST_AUTO_TEST_CASE(topological_order_puts_producers_first) {
  auto root = Scope::root();
  auto a = ops::constant(root, 1.0f);
  auto b = ops::neg(root, a);
  auto c = ops::add(root, a, b);
  const auto pos = places_in_order(root.graph());
  BOOST_TEST(pos[a.node()->id] < pos[b.node()->id]);
  BOOST_TEST(pos[b.node()->id] < pos[c.node()->id]);
}

BOOST_AUTO_TEST_CASE(topological_order_puts_a_producer_with_a_larger_id_before_its_consumer) {
  auto root = Scope::root();
  auto a = ops::constant(root, 1.0f);
  auto b = ops::neg(root, a);
  auto c = ops::neg(root, a);
  auto d = ops::add(root, b, c);
  root.graph().update_input(b.node()->id, 0, {c.node()->id, 0});  // b now reads c, made after it
  const auto pos = places_in_order(root.graph());
  BOOST_TEST(pos[a.node()->id] < pos[c.node()->id]);
  BOOST_TEST(pos[c.node()->id] < pos[b.node()->id]);
  BOOST_TEST(pos[b.node()->id] < pos[d.node()->id]);
}

BOOST_AUTO_TEST_CASE(topological_order_refuses_a_cycle) {
  auto root = Scope::root();
  auto a = ops::constant(root, 1.0f);
  auto b = ops::neg(root, a);
  auto c = ops::neg(root, b);
  root.graph().update_input(b.node()->id, 0, {c.node()->id, 0});  // b reads c reads b
  BOOST_CHECK_EXCEPTION(root.graph().topological_order(), Error, [](const Error& e) {
    return std::string(e.what()).find("graph has a cycle (1 of 3 nodes ordered)") != std::string::npos;
  });
}
