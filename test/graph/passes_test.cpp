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

namespace {

// A graph's nodes as text (op, name, inputs and control inputs by name), in id order.
std::vector<std::string> described(const Graph& g) {
  std::vector<std::string> out;
  for (int i = 0; i < g.size(); ++i) {
    const Node& n = g.node(i);
    std::string s = n.op + " " + n.name + " <-";
    for (auto& in : n.inputs) s += " " + tensor_name(g.node(in.node), in.port);
    for (int c : n.control_inputs) s += " ^" + g.node(c).name;
    out.push_back(s);
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(pruning_and_merging_in_one_copy_gives_what_the_two_passes_give) {
  // Feeds (one read twice, so its readers merge), duplicates, an unneeded branch, control
  // inputs and a while loop (whose back edge is built after its Merge).
  auto root = Scope::root();
  auto x = ops::placeholder(root.with_op_name("x"), DType::float32, {});
  auto fed_mid = ops::neg(root.with_op_name("fed_mid"), x);
  auto a = ops::square(root.with_op_name("a"), fed_mid);
  auto b = ops::square(root.with_op_name("b"), fed_mid);  // same as a
  auto one = ops::constant(root, 1.0f);
  auto one_again = ops::constant(root, 1.0f);
  auto sum = ops::add(root.with_op_name("sum"), a, one);
  auto sum_again = ops::add(root.with_op_name("sum_again"), b, one_again);  // same as sum
  auto gated = ops::identity(root.with_op_name("gated").with_control_dependencies(std::vector<Output>{sum}), sum_again);
  auto loop = ops::while_loop(
      root, [&](const Scope& s, const std::vector<Output>& v) { return ops::less(s, v[0], ops::constant(s, 5.0f)); },
      [&](const Scope& s, const std::vector<Output>& v) {
        return std::vector<Output>{ops::add(s, v[0], ops::constant(s, 1.0f))};
      },
      {ops::constant(root, 0.0f)});
  ops::mul(root.with_op_name("unneeded"), a, b);
  auto y = ops::mul(root.with_op_name("y"), loop[0], sum);
  const std::vector<Endpoint> feeds{fed_mid.endpoint()};
  const std::vector<Endpoint> fetches{y.endpoint(), sum_again.endpoint(), fed_mid.endpoint()};
  const std::vector<int> targets{gated.node()->id};
  auto two = eliminate_common_subexpressions(extract_subgraph(root.graph(), feeds, fetches, targets));
  auto one_pass = prune_and_merge(root.graph(), feeds, fetches, targets);
  BOOST_TEST(described(*one_pass.graph) == described(*two.graph), boost::test_tools::per_element());
  BOOST_TEST(count_op(*one_pass.graph, "Square") == 1);
  BOOST_TEST(count_op(*one_pass.graph, "Neg") == 0);  // fed: an _Arg instead
  BOOST_TEST(count_op(*one_pass.graph, "_Arg") == 1);
  BOOST_TEST(count_op(*one_pass.graph, "Mul") == 1);  // not the unneeded one
  auto name_of = [](const Subgraph& s, Endpoint e) { return tensor_name(s.graph->node(e.node), e.port); };
  for (std::size_t i = 0; i < fetches.size(); ++i)
    BOOST_TEST(name_of(one_pass, one_pass.fetches[i]) == name_of(two, two.fetches[i]));
  BOOST_TEST(one_pass.graph->node(one_pass.targets[0]).name == two.graph->node(two.targets[0]).name);
  BOOST_TEST(one_pass.graph->node(one_pass.args[0]).name == two.graph->node(two.args[0]).name);
}
