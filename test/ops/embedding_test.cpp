// Embeddings (ops/state/embedding.hpp): gather and its dense gradient, lookups over a table
// split into uneven parts, sparse updates that change only the rows a step read (slots too),
// and a split table that trains to the values of an unsplit one.
#include <boost/test/unit_test.hpp>

#include <random>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

std::vector<float> iota_rows(int64_t rows, int64_t width) {
  std::vector<float> v(std::size_t(rows * width));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(i) * 0.5f - 3.0f;
  return v;
}

int count_ops(const Graph& g, const std::string& op) {
  int n = 0;
  for (int i = 0; i < g.size(); ++i) n += g.node(i).op == op;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(gather_reads_rows_and_its_gradient_adds_them_into_a_dense_tensor) {
  auto root = Scope::root();
  auto params = ops::constant<float>(root, iota_rows(4, 2), {4, 2});
  auto ids = ops::constant<int32_t>(root, {3, 0, 3}, {3});
  auto rows = ops::gather(root, params, ids);
  auto loss = ops::sum(root, ops::mul(root, rows, ops::constant<float>(root, {1, 2, 3, 4, 5, 6}, {3, 2})));
  auto grad = gradients(root, {loss}, {params})[0];
  Session s(root);
  auto out = s.run({rows, grad});
  BOOST_TEST(out[0].shape() == (Shape{3, 2}));
  BOOST_TEST(out[0].to_vector<float>() == (std::vector<float>{0.0f, 0.5f, -3.0f, -2.5f, 0.0f, 0.5f}));
  // Row 3 read twice: its gradient is the sum of both; rows 1 and 2 get none.
  BOOST_TEST(out[1].to_vector<float>() == (std::vector<float>{3, 4, 0, 0, 0, 0, 1 + 5, 2 + 6}));
}

BOOST_AUTO_TEST_CASE(a_lookup_over_three_uneven_parts_reads_the_rows_of_the_whole_table_in_the_ids_shape) {
  auto root = Scope::root();
  auto table = ops::partitioned_variable(root, "emb", ops::constant<float>(root, iota_rows(7, 2), {7, 2}), 3);
  BOOST_TEST(table.parts[0].shape().dim(0) == 3);  // 7 rows: 3, 2, 2
  BOOST_TEST(table.parts[2].shape().dim(0) == 2);
  auto ids = ops::placeholder(root.with_op_name("ids"), DType::int64, PartialShape{2, 3});
  auto rows = ops::embedding_lookup(root, table, ids);
  BOOST_TEST(rows.shape().to_string() == "[2,3,2]");
  SessionOptions options;
  options.num_param_shards = 3;
  Session s(root, options);
  s.run({}, {}, {ops::global_variables_initializer(root)});
  auto whole = iota_rows(7, 2);
  std::vector<int64_t> picked{6, 0, 3, 3, 2, 5};
  auto out = s.run({{ids, Tensor::from_vector<int64_t>(picked, {2, 3})}}, {rows})[0];
  BOOST_TEST(out.shape() == (Shape{2, 3, 2}));
  std::vector<float> want;
  for (int64_t id : picked) want.insert(want.end(), {whole[std::size_t(2 * id)], whole[std::size_t(2 * id + 1)]});
  BOOST_TEST(out.to_vector<float>() == want);
}

BOOST_AUTO_TEST_CASE(minimize_updates_only_the_rows_looked_up_and_their_slots) {
  auto root = Scope::root();
  const auto start = iota_rows(6, 3);
  auto table = ops::variable(root.with_op_name("emb"), ops::constant<float>(root, start, {6, 3}));
  auto ids = ops::placeholder(root.with_op_name("ids"), DType::int32, PartialShape{3});
  auto loss = ops::sum(root, ops::square(root, ops::embedding_lookup(root, table, ids)));
  auto train = Optimizer::momentum(0.1, 0.9).minimize(root, loss);
  // A sparse update, and nothing the size of the table in the step.
  BOOST_TEST(count_ops(root.graph(), "SparseApplyGradient") == 1);
  BOOST_TEST(count_ops(root.graph(), "ApplyGradient") == 0);
  BOOST_TEST(count_ops(root.graph(), "GatherGrad") == 0);
  Session s(root);
  s.run({}, {}, {ops::global_variables_initializer(root)});
  // Row 2 twice, row 4 once; then row 4 alone (its momentum carries on, row 2's stays).
  s.run({{ids, Tensor::from_vector<int32_t>({2, 4, 2}, {3})}}, {}, {train});
  s.run({{ids, Tensor::from_vector<int32_t>({4, 4, 4}, {3})}}, {}, {train});
  auto got = s.run({table})[0].to_vector<float>();
  for (int row = 0; row < 6; ++row)
    for (int e = 0; e < 3; ++e) {
      const std::size_t i = std::size_t(row * 3 + e);
      double v = start[i], a = 0;
      auto step = [&](double times) {  // d/dv of times * v^2, then momentum
        a = 0.9 * a + times * 2 * v;
        v -= 0.1 * a;
      };
      if (row == 2) step(2);  // two lookups: their gradients summed
      if (row == 4) step(1), step(3);
      BOOST_TEST(std::abs(got[i] - v) < 1e-5, "row " << row << " element " << e << ": " << got[i] << " vs " << v);
      if (row != 2 && row != 4) BOOST_TEST(got[i] == start[i]);  // untouched, exactly
    }
}

BOOST_AUTO_TEST_CASE(a_table_split_over_two_shards_trains_to_the_values_of_an_unsplit_one) {
  // A bag of 4 ids per example, averaged, into a dense layer; momentum 0.05/0.9, 40 steps.
  const int64_t rows = 50, width = 4, batch = 8, classes = 3;
  std::mt19937 rng(11);
  std::normal_distribution<float> normal(0, 0.3f);
  std::vector<float> table0(std::size_t(rows * width)), w0(std::size_t(width * classes));
  for (auto& x : table0) x = normal(rng);
  for (auto& x : w0) x = normal(rng);
  std::vector<std::vector<int64_t>> id_batches;
  std::vector<std::vector<int32_t>> label_batches;
  std::uniform_int_distribution<int64_t> any_row(0, rows - 1);
  for (int step = 0; step < 40; ++step) {
    std::vector<int64_t> ids;
    std::vector<int32_t> labels;
    for (int b = 0; b < batch; ++b) {
      for (int k = 0; k < 4; ++k) ids.push_back(any_row(rng));
      labels.push_back(int32_t(ids[std::size_t(b * 4)] % classes));  // learnable from the first id
    }
    id_batches.push_back(ids);
    label_batches.push_back(labels);
  }
  auto train = [&](int parts) {
    auto root = Scope::root();
    auto init = ops::constant<float>(root, table0, {rows, width});
    auto table = ops::partitioned_variable(root, "emb", init, parts);
    auto w = ops::variable(root.with_op_name("w"), ops::constant<float>(root, w0, {width, classes}));
    auto ids = ops::placeholder(root.with_op_name("ids"), DType::int64, PartialShape{batch, 4});
    auto labels = ops::placeholder(root.with_op_name("labels"), DType::int32, PartialShape{batch});
    auto bag = ops::mean(root, ops::embedding_lookup(root, table, ids), std::vector<int64_t>{1});
    auto logits = ops::matmul(root, bag, w);
    auto loss = ops::mean(root, ops::sparse_softmax_cross_entropy_with_logits(root, logits, labels));
    auto op = Optimizer::momentum(0.05, 0.9).minimize(root, loss);
    BOOST_TEST(count_ops(root.graph(), "SparseApplyGradient") == parts);
    SessionOptions options;
    options.num_param_shards = parts;
    Session s(root, options);
    s.run({}, {}, {ops::global_variables_initializer(root)});
    float first = 0, last = 0;
    for (std::size_t step = 0; step < id_batches.size(); ++step) {
      FeedList feeds{{ids, Tensor::from_vector<int64_t>(id_batches[step], {batch, 4})},
                     {labels, Tensor::from_vector<int32_t>(label_batches[step], {batch})}};
      const float l = s.run(feeds, {loss}, {op})[0].scalar_value<float>();
      (step == 0 ? first : last) = l;
    }
    auto out = s.run({table.value, w});
    BOOST_TEST(last < first, "loss " << first << " -> " << last);
    return std::pair{out[0].to_vector<float>(), out[1].to_vector<float>()};
  };
  auto whole = train(1);
  auto split = train(2);
  BOOST_TEST(whole.first != table0);  // it trained
  BOOST_TEST(split.first == whole.first);  // bitwise: the same rows, summed in the same order
  BOOST_TEST(split.second == whole.second);
}

BOOST_AUTO_TEST_CASE(an_id_outside_the_table_fails_the_step_naming_it) {
  auto root = Scope::root();
  auto table = ops::partitioned_variable(root, "emb", ops::constant<float>(root, iota_rows(6, 2), {6, 2}), 2);
  auto ids = ops::placeholder(root.with_op_name("ids"), DType::int32, PartialShape{2});
  auto rows = ops::embedding_lookup(root, table, ids);
  auto unsplit = ops::variable(root.with_op_name("plain"), ops::constant<float>(root, iota_rows(6, 2), {6, 2}));
  auto plain_rows = ops::embedding_lookup(root, unsplit, ids);
  Session s(root);
  s.run({}, {}, {ops::global_variables_initializer(root)});
  auto m = error_of([&] { s.run({{ids, Tensor::from_vector<int32_t>({1, 6}, {2})}}, {rows}); },
                    ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "id 6"), m);
  BOOST_TEST(contains(m, "6 rows"), m);
  m = error_of([&] { s.run({{ids, Tensor::from_vector<int32_t>({-1, 0}, {2})}}, {plain_rows}); },
               ErrorCode::invalid_argument);
  BOOST_TEST(contains(m, "index -1"), m);
}

BOOST_AUTO_TEST_CASE(the_partitioner_splits_by_bytes_within_its_limits) {
  ops::Partitioner p{.max_part_bytes = 1000};
  BOOST_TEST(p.parts_for(Shape{10, 25}, DType::float32) == 1);   // 1000 bytes
  BOOST_TEST(p.parts_for(Shape{10, 26}, DType::float32) == 2);   // 1040
  BOOST_TEST(p.parts_for(Shape{100, 25}, DType::float64) == 20);
  BOOST_TEST((ops::Partitioner{.max_part_bytes = 1000, .max_parts = 4}.parts_for(Shape{100, 25}, DType::float64)) == 4);
  BOOST_TEST(p.parts_for(Shape{3, 1000}, DType::float32) == 3);  // never more parts than rows
  auto root = Scope::root();
  auto table = ops::partitioned_variable(root, "emb", ops::constant<float>(root, iota_rows(10, 26), {10, 26}), p);
  BOOST_TEST(table.parts.size() == 2u);
}
