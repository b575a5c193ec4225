#include <boost/test/unit_test.hpp>

#include "graph/prune.hpp"
#include "ops/all.hpp"

using namespace troupe;

namespace {

int count_op(const Graph& g, const std::string& op) {
  int n = 0;
  for (int i = 0; i < g.size(); ++i) n += g.node(i).op == op;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(pruning_keeps_only_what_the_fetches_need) {
  auto root = Scope::root();
  auto a = ops::constant(root, 1.0f);
  auto b = ops::constant(root, 2.0f);
  auto used = ops::add(root, a, b);
  auto unused = ops::mul(root, a, ops::constant(root, 3.0f));
  auto needed = needed_nodes(root.graph(), {}, {used.endpoint()}, {});
  BOOST_TEST(needed[used.node()->id]);
  BOOST_TEST(needed[a.node()->id]);
  BOOST_TEST(!needed[unused.node()->id]);
  auto sub = extract_subgraph(root.graph(), {}, {used.endpoint()}, {});
  BOOST_TEST(sub.graph->size() == 3);
}

BOOST_AUTO_TEST_CASE(pruning_follows_control_inputs_of_targets) {
  auto root = Scope::root();
  auto a = ops::constant(root, 1.0f);
  auto side = ops::neg(root, a);
  auto t = ops::no_op(root.with_control_dependencies(std::vector<Output>{side}));
  auto needed = needed_nodes(root.graph(), {}, {}, {t->id});
  BOOST_TEST(needed[side.node()->id]);
  BOOST_TEST(needed[a.node()->id]);
}

BOOST_AUTO_TEST_CASE(a_feed_in_the_middle_cuts_off_what_is_upstream) {
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32);
  auto h = ops::exp(root.with_op_name("h"), x);
  auto y = ops::neg(root.with_op_name("y"), h);
  // Feeding h makes x unnecessary: no error about the unfed placeholder.
  auto sub = extract_subgraph(root.graph(), {h.endpoint()}, {y.endpoint()}, {});
  BOOST_TEST(count_op(*sub.graph, "Placeholder") == 0);
  BOOST_TEST(count_op(*sub.graph, "Exp") == 0);
  BOOST_TEST(count_op(*sub.graph, "_Arg") == 1);
  BOOST_REQUIRE(sub.args.size() == 1u);
  BOOST_TEST(sub.graph->node(sub.graph->node(sub.fetches[0].node).inputs[0].node).op == "_Arg");
}

BOOST_AUTO_TEST_CASE(a_fetch_that_needs_an_unfed_placeholder_is_refused_naming_both) {
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32);
  auto y = ops::neg(root.with_op_name("y"), x);
  try {
    needed_nodes(root.graph(), {}, {y.endpoint()}, {});
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    std::string m = e.what();
    BOOST_TEST(e.code() == ErrorCode::failed_precondition);
    BOOST_TEST(m.find("fetch 'y:0'") != std::string::npos);
    BOOST_TEST(m.find("placeholder 'x'") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(cse_merges_identical_nodes_and_rewires_their_consumers) {
  auto root = Scope::root();
  auto a = ops::constant(root, 1.0f);
  auto a2 = ops::constant(root, 1.0f);  // same value: merged
  auto s1 = ops::add(root, a, a);
  auto s2 = ops::add(root, a2, a2);     // same as s1 once a2 is a
  auto y = ops::mul(root.with_op_name("y"), s1, s2);
  auto sub = eliminate_common_subexpressions(extract_subgraph(root.graph(), {}, {y.endpoint()}, {}));
  BOOST_TEST(count_op(*sub.graph, "Const") == 1);
  BOOST_TEST(count_op(*sub.graph, "Add") == 1);
  const Node& mul = sub.graph->node(sub.fetches[0].node);
  BOOST_TEST(mul.name == "y");
  BOOST_TEST(mul.inputs[0].node == mul.inputs[1].node);
}

BOOST_AUTO_TEST_CASE(cse_keeps_nodes_that_differ_in_attributes_or_inputs) {
  auto root = Scope::root();
  auto x = ops::constant(root, Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}));
  auto t1 = ops::matmul(root, x, x, {.transpose_a = true});
  auto t2 = ops::matmul(root, x, x, {.transpose_b = true});
  auto c1 = ops::constant(root, 1.0f);
  auto c2 = ops::constant(root, 2.0f);
  auto y = ops::group(root, {t1, t2, c1, c2});
  auto sub = eliminate_common_subexpressions(extract_subgraph(root.graph(), {}, {}, {y->id}));
  BOOST_TEST(count_op(*sub.graph, "MatMul") == 2);
  BOOST_TEST(count_op(*sub.graph, "Const") == 3);
}

BOOST_AUTO_TEST_CASE(cse_never_merges_stateful_ops) {
  auto root = Scope::root();
  auto r1 = ops::random_uniform(root, {3}, DType::float32, 0, 1, {.seed = 1});
  auto r2 = ops::random_uniform(root, {3}, DType::float32, 0, 1, {.seed = 1});
  auto y = ops::add(root, r1, r2);
  auto sub = eliminate_common_subexpressions(extract_subgraph(root.graph(), {}, {y.endpoint()}, {}));
  BOOST_TEST(count_op(*sub.graph, "RandomUniform") == 2);
}

BOOST_AUTO_TEST_CASE(cse_keeps_fetches_and_targets_pointing_at_the_survivors) {
  auto root = Scope::root();
  auto a = ops::constant(root, 5.0f);
  auto n1 = ops::neg(root, a);
  auto n2 = ops::neg(root, a);
  auto sub = eliminate_common_subexpressions(
      extract_subgraph(root.graph(), {}, {n1.endpoint(), n2.endpoint()}, {n2.node()->id}));
  BOOST_TEST(sub.fetches[0].node == sub.fetches[1].node);
  BOOST_TEST(sub.targets[0] == sub.fetches[0].node);
}
