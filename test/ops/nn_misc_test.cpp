// Dropout, ArgMax and accuracy, Concat and Split.
#include <boost/test/unit_test.hpp>

#include <stdlib.h>

#include <filesystem>

#include "actors/state/saver.hpp"

#include "test/ops/gradient_check.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::check_gradient;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {
std::mt19937 rng(11);
Tensor r(Shape s, double lo = -2, double hi = 2) { return testing::random_tensor(rng, DType::float64, s, lo, hi); }
}  // namespace

BOOST_AUTO_TEST_CASE(dropout_keeps_the_expected_fraction_scaled_up_and_passes_through_in_inference) {
  auto root = Scope::root();
  auto ones = ops::constant(root, Tensor::from_vector<float>(std::vector<float>(100000, 1.0f), {100000}));
  auto train = ops::dropout(root, ones, 0.3, {.seed = 4});
  auto infer = ops::dropout(root, ones, 0.3, {.training = false});
  Session s(root);
  auto out = s.run({train, infer})[0].to_vector<float>();
  int kept = 0;
  for (float v : out) {
    BOOST_TEST((v == 0.0f || std::abs(v - 1 / 0.7f) < 1e-6f));
    kept += v != 0;
  }
  // Binomial(100000, 0.7): standard deviation 145; allow 5 of them.
  BOOST_TEST(std::abs(kept - 70000) < 725);
  auto plain = s.run({infer})[0].to_vector<float>();
  BOOST_TEST(std::count(plain.begin(), plain.end(), 1.0f) == 100000);
  Session again(root);
  BOOST_TEST((again.run({train})[0].to_vector<float>() == out), "a seed gives the same mask in a new session");
}

BOOST_AUTO_TEST_CASE(the_gradient_of_dropout_is_its_mask) {
  auto root = Scope::root();
  auto x = ops::placeholder(root, DType::float64, Shape{1000});
  auto y = ops::dropout(root, x, 0.5, {.seed = 9});
  auto g = gradients(root, {ops::sum(root, y)}, {x});
  Session s(root);
  auto out = s.run({{x, r({1000})}}, {y, g[0]});
  // The same run: where y kept x, the gradient is 2; where it dropped, 0.
  auto in = s.run({{x, Tensor::from_vector<double>(std::vector<double>(1000, 1.0))}}, {y, g[0]});
  auto yv = in[0].to_vector<double>(), gv = in[1].to_vector<double>();
  for (int i = 0; i < 1000; ++i) BOOST_TEST(gv[i] == yv[i]);
  BOOST_TEST(out[1].num_elements() == 1000);
}

BOOST_AUTO_TEST_CASE(argmax_picks_the_first_largest_and_accuracy_counts_hits) {
  auto root = Scope::root();
  auto logits = ops::constant<float>(root, {0.1f, 0.9f, 0.0f, 5, 5, 1, -1, -2, -0.5f}, {3, 3});
  auto am = ops::argmax(root, logits, 1);
  auto am0 = ops::argmax(root, logits, 0);
  auto acc = ops::accuracy(root, logits, ops::constant<int32_t>(root, {1, 1, 2}, {3}));
  Session s(root);
  auto out = s.run({am, am0, acc});
  BOOST_TEST(out[0].to_vector<int64_t>() == std::vector<int64_t>({1, 0, 2}), boost::test_tools::per_element());
  BOOST_TEST(out[1].to_vector<int64_t>() == std::vector<int64_t>({1, 1, 1}), boost::test_tools::per_element());
  BOOST_TEST(std::abs(out[2].scalar_value<float>() - 2.0f / 3) < 1e-6f);
  auto m = error_of([&] { ops::argmax(root, logits, 2); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "axis 2"), m);
}

BOOST_AUTO_TEST_CASE(concat_and_split_are_inverse_along_any_axis) {
  auto root = Scope::root();
  auto a = ops::constant<int32_t>(root, {1, 2, 3, 4}, {2, 2});
  auto b = ops::constant<int32_t>(root, {5, 6}, {2, 1});
  auto c = ops::concat(root, {a, b}, 1);
  auto rows = ops::concat(root, {a, a}, -2);
  auto parts = ops::split(root, rows, 0, 2);
  BOOST_TEST(c.shape().to_string() == "[2,3]");
  Session s(root);
  auto out = s.run({c, rows, parts[0], parts[1]});
  BOOST_TEST(out[0].to_vector<int32_t>() == std::vector<int32_t>({1, 2, 5, 3, 4, 6}), boost::test_tools::per_element());
  BOOST_TEST(out[1].to_vector<int32_t>() == std::vector<int32_t>({1, 2, 3, 4, 1, 2, 3, 4}), boost::test_tools::per_element());
  BOOST_TEST(out[2].to_vector<int32_t>() == out[3].to_vector<int32_t>(), boost::test_tools::per_element());
  auto m = error_of([&] { ops::concat(root, {a, ops::constant<int32_t>(root, {1, 2, 3}, {3, 1})}, 1); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "[3,1]"), m);
  m = error_of([&] { ops::split(root, b, 0, 3); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "does not split into 3"), m);
}

BOOST_AUTO_TEST_CASE(gradients_of_concat_and_split_match_central_differences) {
  using V = std::vector<Output>;
  auto sq = [](const Scope& s, Output y) { return ops::mul(s, y, y); };
  check_gradient([=](const Scope& s, const V& x) { return sq(s, ops::concat(s, {x[0], x[1], x[2]}, 1)); },
                 {r({2, 1, 3}), r({2, 2, 3}), r({2, 3, 3})}, "concat axis 1");
  check_gradient([=](const Scope& s, const V& x) {
                   auto p = ops::split(s, x[0], -1, 3);
                   return ops::add(s, sq(s, p[0]), ops::mul(s, p[2], ops::constant(s, 3.0)));  // p[1] unused
                 },
                 {r({2, 6})}, "split, one part unused");
}

// Dropout with the global step as its counter: a model trained 4 steps, checkpointed after 2
// and resumed in a fresh session, makes the same last 2 steps to the bit (the masks depend on
// (seed, step) alone; without the counter the resumed process would restart its generator and
// draw the masks of steps 1 and 2 again).
BOOST_AUTO_TEST_CASE(training_with_dropout_resumed_from_a_checkpoint_draws_the_masks_the_uninterrupted_run_drew) {
  char name[] = "/tmp/troupe-dropout-XXXXXX";
  BOOST_REQUIRE(::mkdtemp(name) != nullptr);
  const std::string dir = std::string(name) + "/ckpt";
  struct Model {
    Scope root = Scope::root();
    ops::GlobalStep step = ops::global_step(root);
    Output w = ops::variable(root.with_op_name("w"), ops::fill(root, {64}, ops::constant(root, 0.5f)));
    Output loss = ops::sum(root, ops::square(root, ops::dropout(root, w, 0.5, {.seed = 17, .counter = step.value})));
    Node* train = Optimizer::momentum(0.1, 0.9).minimize(root, loss, {}, step.value);
    float run(Session& s) { return s.run({}, {loss}, {train})[0].scalar_value<float>(); }
  };
  Model a;
  Session s(a.root);
  s.run({}, {}, {ops::global_variables_initializer(a.root)});
  std::vector<float> losses{a.run(s), a.run(s)};
  Saver saver(s);
  const std::string path = saver.save(dir, a.step.value);
  losses.push_back(a.run(s));
  losses.push_back(a.run(s));
  BOOST_TEST(losses[2] != losses[3], "other masks at other steps");

  Model b;
  Session r(b.root);
  Saver(r).restore(path);
  BOOST_TEST(b.run(r) == losses[2]);
  BOOST_TEST(b.run(r) == losses[3]);
  BOOST_TEST(r.run({b.w})[0].to_vector<float>() == s.run({a.w})[0].to_vector<float>(), boost::test_tools::per_element());
  std::filesystem::remove_all(name);
}
