#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <fstream>
#include <random>

#include "actors/session.hpp"
#include "graph/graph_def.hpp"
#include "ops/all.hpp"

using namespace troupe;

namespace {

// A graph with attributes of every kind the ops use: tensors, shapes, lists, dtypes, bools.
struct Model {
  Scope root = Scope::root();
  Output x, y, z;
  Node* target;
  Model() {
    x = ops::placeholder(root.with_op_name("x"), DType::float32, {-1, 3});
    auto w = ops::constant(root.with_op_name("w"), Tensor::from_vector<float>({1, 2, 3, 4, 5, 6}, {3, 2}));
    auto h = ops::matmul(root.sub("dense"), x, w, {.transpose_b = false});
    auto t = ops::transpose(root, h, {1, 0});
    y = ops::mean(root.with_op_name("y"), ops::square(root, t), std::vector<int64_t>{-1}, true);
    auto r = ops::reshape(root, ops::cast(root, y, DType::float64), {-1});
    z = ops::maximum(root.with_op_name("z"), r, ops::constant(root, 2.0));
    target = ops::group(root.with_op_name("all"), {y, z});
  }
};

Tensor input() { return Tensor::from_vector<float>({1, -2, 3, 0.5f, 0.25f, -1}, {2, 3}); }

void expect_same(const Tensor& a, const Tensor& b) {
  BOOST_TEST(a.describe() == b.describe());
  BOOST_TEST(std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0);
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_exported_and_imported_graph_runs_to_the_same_results) {
  Model m;
  auto bytes = graph_to_bytes(m.root.graph());
  auto copy = graph_from_bytes(bytes.data(), bytes.size());
  BOOST_TEST(copy->size() == m.root.graph().size());
  Session original(m.root), imported(copy);
  auto a = original.run({{"x", input()}}, {"y", "z"}, {"all"});
  auto b = imported.run({{"x", input()}}, {"y", "z"}, {"all"});
  expect_same(a[0], b[0]);
  expect_same(a[1], b[1]);
}

BOOST_AUTO_TEST_CASE(import_keeps_names_devices_attributes_and_control_inputs) {
  Model m;
  auto bytes = graph_to_bytes(m.root.graph());
  auto copy = graph_from_bytes(bytes.data(), bytes.size());
  for (int i = 0; i < m.root.graph().size(); ++i) {
    const Node& a = m.root.graph().node(i);
    const Node* b = copy->find(a.name);
    BOOST_REQUIRE(b);
    BOOST_TEST(a.op == b->op);
    BOOST_TEST(a.requested_device == b->requested_device);
    BOOST_TEST(a.inputs.size() == b->inputs.size());
    BOOST_TEST(a.control_inputs.size() == b->control_inputs.size());
    BOOST_TEST(a.attrs.size() == b->attrs.size());
    for (auto& [name, value] : a.attrs) BOOST_TEST(attr_equal(value, b->attrs.at(name)), name);
    for (int p = 0; p < a.num_outputs(); ++p)
      BOOST_TEST(a.output_shapes[p].to_string() == b->output_shapes[p].to_string());
  }
}

BOOST_AUTO_TEST_CASE(a_graph_file_round_trips) {
  Model m;
  std::string path = "/tmp/troupe_graph_def_test_" + std::to_string(::getpid()) + ".graph";
  write_graph_file(m.root.graph(), path);
  auto copy = read_graph_file(path);
  std::remove(path.c_str());
  Session s(copy);
  auto out = s.run({{"x", input()}}, {"z"});
  BOOST_TEST(out[0].num_elements() == 2);
}

BOOST_AUTO_TEST_CASE(a_missing_graph_file_is_named_in_the_error) {
  try {
    read_graph_file("/nonexistent/troupe.graph");
    BOOST_FAIL("expected an error");
  } catch (const Error& e) {
    BOOST_TEST(e.code() == ErrorCode::not_found);
    BOOST_TEST(std::string(e.what()).find("/nonexistent/troupe.graph") != std::string::npos);
  }
}

BOOST_AUTO_TEST_CASE(corrupt_graph_bytes_are_refused_as_data_loss) {
  Model m;
  auto bytes = graph_to_bytes(m.root.graph());
  auto truncated = bytes;
  truncated.resize(bytes.size() / 2 / 8 * 8);
  BOOST_CHECK_EXCEPTION(graph_from_bytes(truncated.data(), truncated.size(), "truncated.graph"), Error,
                        [](const Error& e) {
                          return e.code() == ErrorCode::data_loss &&
                                 std::string(e.what()).find("truncated.graph") != std::string::npos;
                        });
  std::mt19937 rng(7);
  for (int trial = 0; trial < 50; ++trial) {
    auto noisy = bytes;
    for (int k = 0; k < 8; ++k) noisy[rng() % noisy.size()] ^= uint8_t(1 + rng() % 255);
    try {
      auto g = graph_from_bytes(noisy.data(), noisy.size(), "noisy");
      BOOST_TEST(g->size() >= 0);  // flipped bytes inside a value may still parse
    } catch (const Error& e) {
      BOOST_TEST(std::string(e.what()).find("noisy") != std::string::npos);
    }
  }
  unsigned char odd[5] = {1, 2, 3, 4, 5};
  BOOST_CHECK_THROW(graph_from_bytes(odd, 5), Error);
}
