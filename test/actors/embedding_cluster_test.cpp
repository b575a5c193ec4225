// An embedding table on parameter servers (ops/state/embedding.hpp): troupe-node processes on
// 127.0.0.1, ps:0 and ps:1 with a variable memory budget each, and worker:0. A table larger
// than one ps's budget is refused naming it; split over the two ps by replica_device_setter it
// trains, each part gathered and updated on its own ps, to the values an unsplit table reaches
// in one process. Every process is stopped by its pid, also when a check fails.
#include <boost/test/unit_test.hpp>

#include "actors/session.hpp"
#include "ops/all.hpp"
#include "ops/state/replica_device_setter.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/node_cluster.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

constexpr int64_t kRows = 1000, kWidth = 32;  // 128000 bytes of float32
constexpr const char* kBudgetMiB = "0.1";     // 104857 bytes: half the table fits, not all of it

// ps:0 and ps:1, each with the budget, and worker:0.
struct TwoPsOneWorker : troupe::testing::NodeCluster {
  TwoPsOneWorker()
      : NodeCluster({{"ps", 2}, {"worker", 1}}, [](const std::string& task) {
          return task.rfind("ps:", 0) == 0 ? std::vector<std::string>{"--variable-memory-mb", kBudgetMiB}
                                           : std::vector<std::string>{};
        }) {}
  SessionOptions on_worker() const { return session_on("worker:0"); }
};

std::vector<float> initial_table() {
  std::vector<float> v(std::size_t(kRows * kWidth));
  for (std::size_t i = 0; i < v.size(); ++i) v[i] = float(int(i % 97) - 48) / 64.0f;
  return v;
}

// loss = mean((sum of the looked-up rows . target)^2 ...): a small regression over a bag of ids.
struct Model {
  Scope root = Scope::root();
  Scope s;
  ops::PartitionedVariable table;
  Output ids, loss;
  Node* train = nullptr;
  Model(int parts, bool on_cluster)
      : s(on_cluster ? root.with_device_function(replica_device_setter(2, {.worker_device = "/job:worker/task:0"}))
                     : root) {
    table = ops::partitioned_variable(s, "emb", ops::constant<float>(s, initial_table(), {kRows, kWidth}), parts);
    ids = ops::placeholder(s.with_op_name("ids"), DType::int64, PartialShape{16});
    auto rows = ops::embedding_lookup(s, table, ids);
    auto target = ops::constant<float>(s, std::vector<float>(std::size_t(kWidth), 0.25f), {kWidth, 1});
    auto pred = ops::matmul(s, rows, target);
    loss = ops::mean(s, ops::square(s, ops::sub(s, pred, ops::constant(s, 1.0f))));
    train = Optimizer::sgd(0.05).minimize(s, loss);
  }
  std::vector<float> fit(Session& session) {
    session.run({}, {}, {ops::global_variables_initializer(root)});
    for (int step = 0; step < 30; ++step) {
      std::vector<int64_t> batch;
      for (int k = 0; k < 16; ++k) batch.push_back((step * 37 + k * 61) % kRows);
      session.run({{ids, Tensor::from_vector<int64_t>(batch)}}, {}, {train});
    }
    return session.run({table.value})[0].to_vector<float>();
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_table_over_one_ps_budget_is_refused_naming_it_and_split_over_two_ps_trains_as_unsplit) {
  TwoPsOneWorker cluster;
  // Unsplit, the table does not fit in ps:0's budget: its initializer says so.
  {
    Model whole_on_cluster(1, true);
    Session session(whole_on_cluster.root, cluster.on_worker());
    auto m = error_of([&] { session.run({}, {}, {ops::global_variables_initializer(whole_on_cluster.root)}); },
                      ErrorCode::resource_exhausted);
    BOOST_TEST(contains(m, "'emb/part_0'"), m);
    BOOST_TEST(contains(m, "task ps:"), m);
    BOOST_TEST(contains(m, "128000 bytes"), m);
  }
  // Split in two, one part on each ps (balanced by bytes): it trains, the gathers and the
  // sparse updates running on the ps that hold the rows.
  Model split(2, true);
  for (auto* part : {split.table.parts[0].node(), split.table.parts[1].node()})
    BOOST_TEST(part->requested_device.find("/job:ps/task:") == 0, part->requested_device);
  BOOST_TEST(split.table.parts[0].node()->requested_device != split.table.parts[1].node()->requested_device);
  Session on_cluster(split.root, cluster.on_worker());
  auto trained = split.fit(on_cluster);
  Model whole(1, false);
  Session local(whole.root);
  auto reference = whole.fit(local);
  BOOST_TEST(trained != initial_table());
  BOOST_TEST(trained == reference);  // bitwise
}
