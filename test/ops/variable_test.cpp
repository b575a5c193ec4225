// Variables through a Session: initialisation, reads, Assign/AssignAdd/AssignSub across runs
// against values accumulated in the test, and the errors for misuse. Float32 accumulation is
// compared with elementwise_tolerance (rel 1e-6 per step); integers are exact.
#include "op_test.hpp"

using namespace troupe;
using namespace troupe::testing;

namespace {

std::vector<double> scaled(const std::vector<double>& v, double k) {
  std::vector<double> out;
  for (double x : v) out.push_back(k * x);
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(reading_a_variable_before_it_is_assigned_fails_saying_not_initialised) {
  auto root = Scope::root();
  auto v = ops::variable(root.with_op_name("weights"), {2, 2}, DType::float32);
  Session session(root);
  auto m = error_of([&] { session.run({v}); }, ErrorCode::failed_precondition);
  BOOST_TEST(contains(m, "not initialised"), m);
  BOOST_TEST(contains(m, "weights"), m);
  BOOST_TEST(session.variable_names().empty());
}

BOOST_AUTO_TEST_CASE(adding_to_a_variable_before_it_is_assigned_fails_saying_not_initialised) {
  auto root = Scope::root();
  auto v = ops::variable(root.with_op_name("counter"), Shape{}, DType::int32);
  auto inc = ops::assign_add(root, v, ops::constant<int32_t>(root, 1));
  Session session(root);
  auto m = error_of([&] { session.run({}, {}, {inc}); }, ErrorCode::failed_precondition);
  BOOST_TEST(contains(m, "not initialised"), m);
  BOOST_TEST(contains(m, "counter"), m);
}

BOOST_AUTO_TEST_CASE(an_assigned_value_is_returned_by_assign_and_read_in_later_runs) {
  std::mt19937 rng(1);
  Tensor value = random_tensor(rng, DType::float32, Shape{2, 3}, -1, 1);
  auto root = Scope::root();
  auto v = ops::variable(root.with_op_name("w"), {2, 3}, DType::float32);
  auto init = ops::assign(root, v, ops::constant(root, value));
  Session session(root);
  check_close(session.run({init})[0], DType::float32, Shape{2, 3}, as_doubles(value), {0, 0}, "assign's output");
  check_close(session.run({v})[0], DType::float32, Shape{2, 3}, as_doubles(value), {0, 0}, "first read");
  check_close(session.run({v})[0], DType::float32, Shape{2, 3}, as_doubles(value), {0, 0}, "second read");
  BOOST_TEST((session.variable_names() == std::vector<std::string>{"w"}));
}

BOOST_AUTO_TEST_CASE(a_fed_value_can_be_assigned_and_reassigned) {
  auto root = Scope::root();
  auto v = ops::variable(root, {3}, DType::float64);
  auto p = ops::placeholder(root, DType::float64, {3});
  auto set = ops::assign(root, v, p);
  Session session(root);
  session.run({{p, Tensor::from_vector<double>({1, 2, 3})}}, {}, {set});
  check_close(session.run({v})[0], DType::float64, Shape{3}, {1, 2, 3}, {0, 0}, "first value");
  session.run({{p, Tensor::from_vector<double>({-4, 5, -6})}}, {}, {set});
  check_close(session.run({v})[0], DType::float64, Shape{3}, {-4, 5, -6}, {0, 0}, "second value");
}

BOOST_AUTO_TEST_CASE(assign_add_and_assign_sub_accumulate_across_runs) {
  std::mt19937 rng(2);
  Tensor delta = random_tensor(rng, DType::float32, Shape{2, 3}, -1, 1);
  auto d = as_doubles(delta);
  auto root = Scope::root();
  auto v = ops::variable(root, {2, 3}, DType::float32);
  auto init = ops::assign(root, v, ops::zeros_like(root, ops::constant(root, delta)));
  auto add = ops::assign_add(root, v, ops::constant(root, delta));
  auto sub = ops::assign_sub(root, v, ops::constant(root, delta));
  Session session(root);
  session.run({}, {}, {init});
  for (int k = 1; k <= 3; ++k)
    check_close(session.run({add})[0], DType::float32, Shape{2, 3}, scaled(d, k),
                elementwise_tolerance(DType::float32), "after " + std::to_string(k) + " adds");
  check_close(session.run({sub})[0], DType::float32, Shape{2, 3}, scaled(d, 2),
              elementwise_tolerance(DType::float32), "after a sub");
  check_close(session.run({v})[0], DType::float32, Shape{2, 3}, scaled(d, 2),
              elementwise_tolerance(DType::float32), "read");
}

BOOST_AUTO_TEST_CASE(integer_counters_accumulate_exactly) {
  auto root = Scope::root();
  auto v = ops::variable(root, Shape{}, DType::int64);
  auto init = ops::assign(root, v, ops::constant<int64_t>(root, 100));
  auto up = ops::assign_add(root, v, ops::constant<int64_t>(root, 7));
  auto down = ops::assign_sub(root, v, ops::constant<int64_t>(root, 3));
  Session session(root);
  session.run({}, {}, {init});
  for (int k = 0; k < 10; ++k) session.run({}, {}, {up});
  for (int k = 0; k < 4; ++k) session.run({}, {}, {down});
  BOOST_TEST(session.run({v})[0].scalar_value<int64_t>() == 100 + 70 - 12);
}

BOOST_AUTO_TEST_CASE(a_value_read_earlier_does_not_change_when_the_variable_does) {
  auto root = Scope::root();
  auto v = ops::variable(root, {2}, DType::float32);
  auto init = ops::assign(root, v, ops::constant<float>(root, {1, 2}, Shape{2}));
  auto add = ops::assign_add(root, v, ops::constant<float>(root, {10, 10}, Shape{2}));
  Session session(root);
  session.run({}, {}, {init});
  Tensor before = session.run({v})[0];
  Tensor added = session.run({add})[0];
  session.run({}, {}, {add});
  BOOST_TEST((before.to_vector<float>() == std::vector<float>{1, 2}));
  BOOST_TEST((added.to_vector<float>() == std::vector<float>{11, 12}));
  BOOST_TEST((session.run({v})[0].to_vector<float>() == std::vector<float>{21, 22}));
}

BOOST_AUTO_TEST_CASE(variables_persist_across_runs_but_not_across_sessions) {
  auto root = Scope::root();
  auto v = ops::variable(root.with_op_name("state"), Shape{}, DType::float32);
  auto init = ops::assign(root, v, ops::constant(root, 5.0f));
  {
    Session first(root);
    first.run({}, {}, {init});
    BOOST_TEST(first.run({v})[0].scalar_value<float>() == 5.0f);
  }
  Session second(root);
  auto m = error_of([&] { second.run({v}); }, ErrorCode::failed_precondition);
  BOOST_TEST(contains(m, "not initialised"), m);
}

BOOST_AUTO_TEST_CASE(variables_with_the_same_shared_name_share_their_value) {
  auto root = Scope::root();
  auto a = ops::variable(root, Shape{}, DType::float64, {.shared_name = "shared"});
  auto b = ops::variable(root, Shape{}, DType::float64, {.shared_name = "shared"});
  auto init = ops::assign(root, a, ops::constant(root, 2.5));
  Session session(root);
  session.run({}, {}, {init});
  BOOST_TEST(session.run({b})[0].scalar_value<double>() == 2.5);
  BOOST_TEST((session.variable_names() == std::vector<std::string>{"shared"}));
}

BOOST_AUTO_TEST_CASE(a_shape_mismatched_assign_is_refused_at_graph_build_time_naming_both_shapes) {
  auto root = Scope::root();
  auto v = ops::variable(root.with_op_name("kernel"), {2, 2}, DType::float32);
  auto wrong = ops::constant<float>(root, {1, 2, 3}, Shape{3});
  auto m = error_of([&] { ops::assign(root, v, wrong); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "kernel"), m);
  BOOST_TEST(contains(m, "[3]"), m);
  BOOST_TEST(contains(m, "[2,2]"), m);
  m = error_of([&] { ops::assign_add(root, v, wrong); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "[3]"), m);
  m = error_of([&] { ops::assign_sub(root, v, wrong); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "[3]"), m);
}

BOOST_AUTO_TEST_CASE(a_dtype_mismatched_assign_is_refused_at_graph_build_time_naming_both_dtypes) {
  auto root = Scope::root();
  auto v = ops::variable(root.with_op_name("bias"), {2}, DType::float32);
  auto m = error_of([&] { ops::assign(root, v, ops::constant<double>(root, {1, 2}, Shape{2})); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "bias"), m);
  BOOST_TEST(contains(m, "float64"), m);
  BOOST_TEST(contains(m, "float32"), m);
}

BOOST_AUTO_TEST_CASE(assign_needs_the_output_of_a_variable) {
  auto root = Scope::root();
  auto c = ops::constant(root, 1.0f);
  auto m = error_of([&] { ops::assign(root, c, c); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "Variable"), m);
}

BOOST_AUTO_TEST_CASE(a_variable_of_partly_known_shape_takes_a_value_that_fits_and_keeps_its_shape) {
  auto root = Scope::root();
  auto v = ops::variable(root.with_op_name("rows"), {-1, 2}, DType::float32);
  auto p = ops::placeholder(root, DType::float32, {-1, 2});
  auto set = ops::assign(root, v, p);
  Session session(root);
  session.run({{p, Tensor::zeros(DType::float32, Shape{3, 2})}}, {}, {set});
  BOOST_TEST((session.run({v})[0].shape() == Shape{3, 2}));
  // validate_shape: a later value must have the shape of the current one.
  auto m = error_of([&] { session.run({{p, Tensor::zeros(DType::float32, Shape{4, 2})}}, {}, {set}); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "rows"), m);
  BOOST_TEST(contains(m, "[4,2]"), m);
  BOOST_TEST(contains(m, "[3,2]"), m);
}

BOOST_AUTO_TEST_CASE(assign_without_shape_validation_replaces_the_shape) {
  auto root = Scope::root();
  auto v = ops::variable(root, {2}, DType::int32);
  auto init = ops::assign(root, v, ops::constant<int32_t>(root, {1, 2}, Shape{2}));
  auto grow = ops::assign(root, v, ops::constant<int32_t>(root, {1, 2, 3, 4, 5}, Shape{5}), false);
  Session session(root);
  session.run({}, {}, {init});
  session.run({}, {}, {grow});
  BOOST_TEST((session.run({v})[0].to_vector<int32_t>() == std::vector<int32_t>{1, 2, 3, 4, 5}));
}

BOOST_AUTO_TEST_CASE(a_first_assign_of_a_value_of_unknown_static_shape_is_checked_against_the_declared_shape) {
  auto root = Scope::root();
  auto v = ops::variable(root.with_op_name("square"), {2, 2}, DType::float32);
  auto p = ops::placeholder(root, DType::float32);
  auto set = ops::assign(root, v, p);
  Session session(root);
  auto m = error_of([&] { session.run({{p, Tensor::from_vector<float>({1, 2, 3})}}, {}, {set}); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "square"), m);
}

BOOST_AUTO_TEST_CASE(global_variables_initializer_runs_every_variables_initial_value) {
  auto root = Scope::root();
  auto w = ops::variable(root.with_op_name("w"), ops::constant<float>(root, {1, 2, 3, 4}, {2, 2}));
  auto layer = root.sub("layer");
  auto b = ops::variable(layer.with_op_name("b"), ops::constant<int32_t>(layer, {7}, {1}));
  auto again = ops::read_variable(root, w);  // a second node of w: not a second variable
  auto gs = ops::global_step(root);
  BOOST_TEST(w.shape().to_string() == "[2,2]");
  BOOST_TEST(b.node()->name == "layer/b");
  BOOST_TEST(ops::initializer_of(root.graph(), b)->name == "layer/b/initializer");
  Session session(root);
  session.run({}, {}, {ops::global_variables_initializer(root)});
  auto out = session.run({w, b, again, gs.value});
  BOOST_TEST(out[0].to_string() == Tensor::from_vector<float>({1, 2, 3, 4}, {2, 2}).to_string());
  BOOST_TEST(out[1].data<int32_t>()[0] == 7);
  BOOST_TEST(out[2].to_string() == out[0].to_string());
  BOOST_TEST(out[3].scalar_value<int64_t>() == 0);
  BOOST_TEST(session.variable_names().size() == 3u);
}

BOOST_AUTO_TEST_CASE(variables_initializer_runs_only_the_chosen_variables) {
  auto root = Scope::root();
  auto a = ops::variable(root.with_op_name("a"), ops::constant(root, 1.0f));
  auto b = ops::variable(root.with_op_name("b"), ops::constant(root, 2.0f));
  Session session(root);
  session.run({}, {}, {ops::variables_initializer(root, {a})});
  BOOST_TEST(session.run({a})[0].scalar_value<float>() == 1.0f);
  auto m = error_of([&] { session.run({b}); }, ErrorCode::failed_precondition);
  BOOST_TEST(contains(m, "not initialised"), m);
}

BOOST_AUTO_TEST_CASE(an_initializer_of_all_variables_refuses_a_variable_without_an_initial_value) {
  auto root = Scope::root();
  ops::variable(root.with_op_name("a"), ops::constant(root, 1.0f));
  ops::variable(root.with_op_name("bare"), {2}, DType::float32);
  auto m = error_of([&] { ops::global_variables_initializer(root); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "'bare' has no initial value"), m);
  auto partial = error_of([] {
    auto r = Scope::root();
    ops::variable(r.with_op_name("p"), ops::placeholder(r, DType::float32, PartialShape{-1}));
  }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(partial, "needs a fully defined shape"), partial);
}
