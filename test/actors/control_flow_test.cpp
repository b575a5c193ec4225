// Switch, Merge and cond: dead values propagate through the untaken branch, Merge fires on the
// first live input, and nothing of the untaken branch runs.
#include <boost/test/unit_test.hpp>

#include <chrono>
#include <thread>

#include "actors/session.hpp"
#include "graph/gradients.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/settles.hpp"

using namespace troupe;
using troupe::testing::settles;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

struct Abs {
  Scope root = Scope::root();
  Output x = ops::placeholder(root.with_op_name("x"), DType::float32, Shape{});
  Output y = ops::cond(root, ops::less(root, x, ops::constant(root, 0.0f)), {x},
                       [](const Scope& s, const std::vector<Output>& in) { return std::vector<Output>{ops::neg(s, in[0])}; },
                       [](const Scope& s, const std::vector<Output>& in) { return std::vector<Output>{ops::identity(s, in[0])}; })[0];
};


}  // namespace

BOOST_AUTO_TEST_CASE(cond_takes_the_branch_its_predicate_picks) {
  Abs a;
  Session s(a.root);
  BOOST_TEST(s.run({{a.x, Tensor::scalar(-3.0f)}}, {a.y})[0].scalar_value<float>() == 3.0f);
  BOOST_TEST(s.run({{a.x, Tensor::scalar(2.5f)}}, {a.y})[0].scalar_value<float>() == 2.5f);
  BOOST_TEST(settles(s), "no node keeps a tag once both branches are done");
}

BOOST_AUTO_TEST_CASE(the_untaken_branch_does_not_run) {
  // The else branch divides by zero (an error if it ran) and builds a constant of its own.
  auto root = Scope::root();
  auto n = ops::placeholder(root, DType::int32, Shape{});
  auto out = ops::cond(
      root, ops::greater(root, n, ops::constant(root, 0)), {n},
      [](const Scope& s, const std::vector<Output>& in) {
        return std::vector<Output>{ops::div(s, ops::constant(s, 100), in[0])};
      },
      [](const Scope& s, const std::vector<Output>& in) {
        return std::vector<Output>{ops::div(s, ops::constant(s, 1), ops::zeros_like(s, in[0]))};
      })[0];
  Session s(root);
  BOOST_TEST(s.run({{n, Tensor::scalar<int32_t>(4)}}, {out})[0].scalar_value<int32_t>() == 25);
  // Taking the else branch runs the division by zero, and the step fails naming it.
  auto m = error_of([&] { s.run({{n, Tensor::scalar<int32_t>(0)}}, {out}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "division by zero"), m);
  BOOST_TEST(contains(m, "cond/else"), m);
}

BOOST_AUTO_TEST_CASE(fetching_a_value_of_the_untaken_branch_is_an_error) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, Shape{});
  auto sw = ops::switch_(root, x, ops::constant(root, true));
  auto dead = ops::neg(root.with_op_name("in_the_false_branch"), sw[0]);
  Session s(root);
  BOOST_TEST(s.run({{x, Tensor::scalar(1.0f)}}, {sw[1]})[0].scalar_value<float>() == 1.0f);
  auto m = error_of([&] { s.run({{x, Tensor::scalar(1.0f)}}, {dead}); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "in_the_false_branch"), m);
  BOOST_TEST(contains(m, "untaken branch"), m);
}

BOOST_AUTO_TEST_CASE(merge_forwards_the_live_input_and_its_index) {
  auto root = Scope::root();
  auto p = ops::placeholder(root, DType::boolean, Shape{});
  auto sw = ops::switch_(root, ops::constant(root, 7.0f), p);
  auto m = ops::merge(root, {ops::mul(root, sw[0], ops::constant(root, 10.0f)), ops::neg(root, sw[1])});
  Session s(root);
  auto t = s.run({{p, Tensor::scalar(true)}}, {m[0], m[1]});
  BOOST_TEST(t[0].scalar_value<float>() == -7.0f);
  BOOST_TEST(t[1].scalar_value<int32_t>() == 1);
  auto f = s.run({{p, Tensor::scalar(false)}}, {m[0], m[1]});
  BOOST_TEST(f[0].scalar_value<float>() == 70.0f);
  BOOST_TEST(f[1].scalar_value<int32_t>() == 0);
}

BOOST_AUTO_TEST_CASE(a_merges_index_reaches_a_node_that_reads_it) {
  // A Merge makes its index only for a reader (a consumer or a fetch): here an Add, not a
  // fetch; the second Merge's index has none, and its value still comes.
  auto root = Scope::root();
  auto p = ops::placeholder(root, DType::boolean, Shape{});
  auto sw = ops::switch_(root, ops::constant(root, 7.0f), p);
  auto m = ops::merge(root, {ops::mul(root, sw[0], ops::constant(root, 10.0f)), ops::neg(root, sw[1])});
  auto index_plus_5 = ops::add(root, m[1], ops::constant(root, int32_t(5)));
  auto unread = ops::merge(root, {ops::neg(root, sw[0]), ops::identity(root, sw[1])});
  Session s(root);
  auto t = s.run({{p, Tensor::scalar(true)}}, {index_plus_5, unread[0]});
  BOOST_TEST(t[0].scalar_value<int32_t>() == 6);
  BOOST_TEST(t[1].scalar_value<float>() == 7.0f);
  auto f = s.run({{p, Tensor::scalar(false)}}, {index_plus_5, unread[0]});
  BOOST_TEST(f[0].scalar_value<int32_t>() == 5);
  BOOST_TEST(f[1].scalar_value<float>() == -7.0f);
}

BOOST_AUTO_TEST_CASE(conds_nest) {
  // sign(x) * (|x| > 1 ? 2 : 1), with the inner cond inside the outer then branch.
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, Shape{});
  auto big = ops::greater(root, ops::abs(root, x), ops::constant(root, 1.0f));
  auto y = ops::cond(
      root, big, {x},
      [](const Scope& s, const std::vector<Output>& in) {
        return ops::cond(s, ops::less(s, in[0], ops::constant(s, 0.0f)), {in[0]},
                         [](const Scope& t, const std::vector<Output>&) { return std::vector<Output>{ops::constant(t, -2.0f)}; },
                         [](const Scope& t, const std::vector<Output>&) { return std::vector<Output>{ops::constant(t, 2.0f)}; });
      },
      [](const Scope& s, const std::vector<Output>& in) {
        return ops::cond(s, ops::less(s, in[0], ops::constant(s, 0.0f)), {in[0]},
                         [](const Scope& t, const std::vector<Output>&) { return std::vector<Output>{ops::constant(t, -1.0f)}; },
                         [](const Scope& t, const std::vector<Output>&) { return std::vector<Output>{ops::constant(t, 1.0f)}; });
      })[0];
  Session s(root);
  for (auto [in, want] : std::vector<std::pair<float, float>>{{-5, -2}, {-0.5f, -1}, {0.5f, 1}, {3, 2}})
    BOOST_TEST(s.run({{x, Tensor::scalar(in)}}, {y})[0].scalar_value<float>() == want, "x = " << in);
  BOOST_TEST(settles(s));
}

BOOST_AUTO_TEST_CASE(branches_of_different_dtypes_are_refused) {
  auto root = Scope::root();
  auto m = error_of(
      [&] {
        ops::cond(root, ops::constant(root, true), {},
                  [](const Scope& s, const std::vector<Output>&) { return std::vector<Output>{ops::constant(s, 1.0f)}; },
                  [](const Scope& s, const std::vector<Output>&) { return std::vector<Output>{ops::constant(s, 1)}; });
      },
      ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "float32"), m);
  BOOST_TEST(contains(m, "int32"), m);
}

BOOST_AUTO_TEST_CASE(the_gradient_flows_through_the_taken_branch_only) {
  // y = x < 0 ? -3x : x^2, so dy/dx = -3 or 2x.
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float64, Shape{});
  auto y = ops::cond(
      root, ops::less(root, x, ops::constant(root, 0.0)), {x},
      [](const Scope& s, const std::vector<Output>& in) { return std::vector<Output>{ops::mul(s, in[0], ops::constant(s, -3.0))}; },
      [](const Scope& s, const std::vector<Output>& in) { return std::vector<Output>{ops::square(s, in[0])}; })[0];
  auto g = gradients(root, {y}, {x})[0];
  Session s(root);
  BOOST_TEST(s.run({{x, Tensor::scalar(-2.0)}}, {g})[0].scalar_value<double>() == -3.0);
  BOOST_TEST(s.run({{x, Tensor::scalar(1.5)}}, {g})[0].scalar_value<double>() == 3.0);
  BOOST_TEST(settles(s));
}

BOOST_AUTO_TEST_CASE(the_gradient_of_a_value_both_branches_use_is_the_taken_branchs) {
  // The branches use x directly (not through cond's inputs): cond switches it in all the same,
  // so its gradient comes from the taken branch alone instead of a sum with a dead term.
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float32, Shape{});
  auto p = ops::placeholder(root, DType::boolean, Shape{});
  auto y = ops::cond(
      root, p, {},
      [&](const Scope& s, const std::vector<Output>&) { return std::vector<Output>{ops::mul(s, x, x)}; },
      [&](const Scope& s, const std::vector<Output>&) { return std::vector<Output>{ops::add(s, x, ops::constant(s, 1.0f))}; })[0];
  auto g = gradients(root, {y}, {x})[0];
  Session s(root);
  auto run = [&](bool pred) { return s.run({{x, Tensor::scalar(3.0f)}, {p, Tensor::scalar(pred)}}, {y, g}); };
  auto t = run(true), f = run(false);
  BOOST_TEST(t[0].scalar_value<float>() == 9.0f);
  BOOST_TEST(t[1].scalar_value<float>() == 6.0f);
  BOOST_TEST(f[0].scalar_value<float>() == 4.0f);
  BOOST_TEST(f[1].scalar_value<float>() == 1.0f);
}
