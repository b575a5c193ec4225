// The Saver on a cluster session (troupe-node processes worker:0, ps:0 and ps:1 on 127.0.0.1,
// ports checked free): each ps writes its own data file, a local session restores the
// checkpoint with the same values (and a cluster session restores a local one), momentum's
// slots survive, and a ps that stops answering fails the save naming it within the bound,
// leaving the published checkpoints as they were; a ps killed and started again gets its own
// variables back from the checkpoint through a Supervisor while the other keeps its values.
// Every process is stopped by its pid.
#include <boost/test/unit_test.hpp>

#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <set>

#include "actors/state/saver.hpp"
#include "actors/session.hpp"
#include "actors/cluster/supervisor.hpp"
#include "core/checkpoint.hpp"
#include "ops/all.hpp"
#include "ops/state/replica_device_setter.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/node_cluster.hpp"
#include "test/support/scratch_dir.hpp"

using namespace troupe;
using namespace std::chrono_literals;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

// worker:0, ps:0 and ps:1.
struct TwoPsCluster : troupe::testing::NodeCluster {
  TwoPsCluster() : NodeCluster({{"worker", 1}, {"ps", 2}}) {}
  SessionOptions session() const { return session_on("worker:0"); }  // steps bounded (60 s): a lost value fails the test with its report
};

std::vector<float> values_of(const Tensor& t) { return {t.data<float>(), t.data<float>() + t.num_elements()}; }

// y = x w + b fitted with momentum; the variables (and the global step) spread over two ps
// tasks by replica_device_setter, the rest on worker:0. The same graph runs locally.
struct Model {
  Scope root = Scope::root();
  Scope s = root.with_device_function(replica_device_setter(2));
  ops::GlobalStep step = ops::global_step(s);
  Output w, b, loss;
  Node* train = nullptr;
  Node* init = nullptr;

  // parts > 0: w is a partitioned_variable of that many parts (spread over the ps tasks too).
  explicit Model(int parts = 0) {
    std::vector<float> xs(24);
    for (int i = 0; i < 24; ++i) xs[std::size_t(i)] = float(i % 7) * 0.25f - 0.5f;
    auto x = ops::constant(s, xs, Shape{4, 6});
    auto y = ops::constant(s, std::vector<float>{1, -1, 0.5f, 2, -0.5f, 0, 1.5f, -2}, Shape{4, 2});
    auto w0 = ops::fill(s, {6, 2}, ops::constant(s, 0.1f));
    w = parts == 0 ? ops::variable(s.with_op_name("w"), w0) : ops::partitioned_variable(s, "w", w0, parts).value;
    b = ops::variable(s.with_op_name("b"), ops::constant(s, std::vector<float>{0.1f, -0.2f}, Shape{2}));
    loss = ops::mean(s, ops::square(s, ops::sub(s, ops::add(s, ops::matmul(s, x, w), b), y)));
    train = Optimizer::momentum(0.05, 0.9).minimize(s, loss, {}, step.value);
    init = ops::global_variables_initializer(root);
  }
  float train_step(Session& s) const { return s.run({}, {loss}, {train})[0].scalar_value<float>(); }
  std::vector<float> weights(Session& s) const { return values_of(s.run({w})[0]); }
  // Initialised, three steps trained and saved in the cluster's ckpt/ (ckpt-3): its directory.
  std::string three_steps_saved(Session& s, Saver& saver, troupe::testing::NodeCluster& c) const {
    s.run({}, {}, {init});
    for (int i = 0; i < 3; ++i) train_step(s);
    const std::string dir = c.dir().file("ckpt");
    saver.save(dir, step.value);
    return dir;
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(a_save_and_a_restore_need_only_the_tasks_that_hold_variables_not_a_worker_that_is_away) {
  troupe::testing::NodeCluster c({{"worker", 2}, {"ps", 2}});
  Model m;
  Session session(m.root, c.session_on("worker:0"));
  Saver saver(session);
  const std::string dir = c.dir().file("ckpt");
  saver.check_directory(dir);  // this process and both ps tasks can write there; nothing is left
  BOOST_TEST(std::filesystem::is_empty(dir));
  session.run({}, {}, {m.init});
  m.train_step(session);
  c.node("worker:1").signal(SIGKILL);  // holds no variable
  BOOST_TEST(c.node("worker:1").wait_exit(10s).has_value());
  const std::string path = saver.save(dir, m.step.value);
  BOOST_TEST(path == dir + "/ckpt-1");
  const std::vector<float> saved = m.weights(session);
  m.train_step(session);
  BOOST_TEST(m.weights(session) != saved);
  saver.restore(path);
  BOOST_TEST(m.weights(session) == saved, boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(each_ps_writes_its_own_file_and_a_local_session_resumes_the_cluster_checkpoint_exactly) {
  TwoPsCluster c;
  Model m;
  Session cluster(m.root, c.session());
  cluster.run({}, {}, {m.init});
  for (int i = 0; i < 3; ++i) m.train_step(cluster);
  const std::string path = Saver(cluster).save(c.dir().file("ckpt"), m.step.value);
  BOOST_TEST(path == c.dir().file("ckpt/ckpt-3"));
  BOOST_TEST(latest_checkpoint(c.dir().file("ckpt")).value_or("") == path);
  std::set<std::string> writers;
  for (auto& e : checkpoint::read_index(path).entries) writers.insert(e.file.substr(0, 4));
  BOOST_TEST((writers == std::set<std::string>{"ps-0", "ps-1"}),
             "files: " << fmt::format("{}", fmt::join(writers, ",")));
  std::vector<float> expected;
  for (int i = 0; i < 3; ++i) expected.push_back(m.train_step(cluster));

  // The momentum accumulators came along: the local session makes the same next steps.
  Model local_model;
  Session local(local_model.root);
  RestoreReport report = Saver(local).restore(path);
  BOOST_TEST(report.global_step == 3);
  BOOST_TEST(report.extra.empty());
  BOOST_TEST(contains(fmt::format("{}", fmt::join(report.restored, ",")), "w/momentum/accumulator"));
  for (int i = 0; i < 3; ++i) BOOST_TEST(local_model.train_step(local) == expected[std::size_t(i)], "step " << 4 + i);
  BOOST_TEST(local_model.weights(local) == m.weights(cluster), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_cluster_session_restores_a_local_checkpoint_and_trains_on_from_it) {
  troupe::testing::ScratchDir scratch;
  Model local_model;
  Session local(local_model.root);
  local.run({}, {}, {local_model.init});
  for (int i = 0; i < 2; ++i) local_model.train_step(local);
  const std::string path = Saver(local).save(scratch.file("ckpt"), local_model.step.value);
  std::vector<float> expected;
  for (int i = 0; i < 3; ++i) expected.push_back(local_model.train_step(local));

  TwoPsCluster c;
  Model m;
  Session cluster(m.root, c.session());
  RestoreReport report = Saver(cluster).restore(path);  // no initializer ran
  BOOST_TEST(report.global_step == 2);
  BOOST_TEST(cluster.run({m.step.value})[0].scalar_value<int64_t>() == 2);
  for (int i = 0; i < 3; ++i) BOOST_TEST(m.train_step(cluster) == expected[std::size_t(i)], "step " << 3 + i);
  BOOST_TEST(m.weights(cluster) == local_model.weights(local), boost::test_tools::per_element());
  // And the cluster saves again on top of it.
  BOOST_TEST(Saver(cluster).save(scratch.file("ckpt"), m.step.value) == scratch.file("ckpt/ckpt-5"));
}

BOOST_AUTO_TEST_CASE(a_ps_that_stops_answering_fails_the_save_naming_it_and_leaves_the_published_checkpoints) {
  TwoPsCluster c;
  Model m;
  Session cluster(m.root, c.session());
  cluster.run({}, {}, {m.init});
  m.train_step(cluster);
  Saver saver(cluster, {.max_to_keep = 5, .cluster_task_timeout = 3s});
  const std::string first = saver.save(c.dir().file("ckpt"), 1);
  BOOST_TEST_REQUIRE(c.node("ps:1").stop(5s), "ps:1 did not stop");
  const std::string message = error_of([&] { saver.save(c.dir().file("ckpt"), 2); }, ErrorCode::unavailable);
  BOOST_TEST(contains(message, "task ps:1"), message);
  BOOST_TEST(contains(message, "unchanged"), message);
  BOOST_TEST(latest_checkpoint(c.dir().file("ckpt")).value_or("") == first);
  BOOST_TEST((checkpoint::all_checkpoints(c.dir().file("ckpt")) == std::vector<std::string>{first}));
  checkpoint::verify(first);
  // No temporary directory of the failed save is left behind.
  for (auto& entry : std::filesystem::directory_iterator(c.dir().file("ckpt")))
    BOOST_TEST(!contains(entry.path().filename().string(), ".tmp-ckpt"), entry.path());
}

BOOST_AUTO_TEST_CASE(a_variable_split_over_both_ps_restores_whole_into_a_local_session_slots_included) {
  TwoPsCluster c;
  Model m(2);
  Session cluster(m.root, c.session());
  cluster.run({}, {}, {m.init});
  for (int i = 0; i < 2; ++i) m.train_step(cluster);
  const std::string path = Saver(cluster).save(c.dir().file("ckpt"), m.step.value);
  std::set<std::string> files_of_w;
  for (auto& e : checkpoint::read_index(path).entries)
    if (e.name == "w" || e.name == "w/momentum/accumulator") files_of_w.insert(e.file.substr(0, 4));
  BOOST_TEST((files_of_w == std::set<std::string>{"ps-0", "ps-1"}));
  std::vector<float> expected;
  for (int i = 0; i < 2; ++i) expected.push_back(m.train_step(cluster));

  Model whole;
  Session local(whole.root);
  Saver(local).restore(path);
  for (int i = 0; i < 2; ++i) BOOST_TEST(whole.train_step(local) == expected[std::size_t(i)], "step " << 3 + i);
  BOOST_TEST(whole.weights(local) == m.weights(cluster), boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(a_corrupt_file_of_one_ps_fails_the_cluster_restore_naming_it_and_changes_no_variable) {
  TwoPsCluster c;
  Model m;
  Session cluster(m.root, c.session());
  cluster.run({}, {}, {m.init});
  m.train_step(cluster);
  Saver saver(cluster);
  const std::string path = saver.save(c.dir().file("ckpt"), m.step.value);
  m.train_step(cluster);
  const std::vector<float> now = m.weights(cluster);
  std::string corrupted;
  for (auto& e : checkpoint::read_index(path).entries) {
    if (e.name != "w") continue;
    std::fstream f(path + "/" + e.file, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(std::streamoff(e.offset + e.length / 2));
    f.write("\x7f\x7f", 2);
    corrupted = e.file;
  }
  BOOST_TEST_REQUIRE(!corrupted.empty());
  const std::string message = error_of([&] { saver.restore(path); }, ErrorCode::data_loss);
  BOOST_TEST(contains(message, corrupted), message);
  BOOST_TEST(contains(message, "no variable was changed"), message);
  BOOST_TEST(contains(message, "task ps:"), message);
  BOOST_TEST(m.weights(cluster) == now, boost::test_tools::per_element());
  BOOST_TEST(cluster.run({m.step.value})[0].scalar_value<int64_t>() == 2);
}

BOOST_AUTO_TEST_CASE(a_killed_ps_started_again_gets_its_variables_back_alone_and_training_goes_on) {
  TwoPsCluster c;
  Model m;
  Session session(m.root, c.session());
  Saver saver(session);
  const std::string dir = m.three_steps_saved(session, saver, c);
  std::vector<Recovery> told;
  Supervisor supervisor(session, &saver,
                        {.checkpoint_dir = dir, .grace = 20s, .on_recovery = [&](const Recovery& r) { told.push_back(r); }});
  for (int i = 0; i < 2; ++i) supervisor.run([&] { return m.train_step(session); });
  supervisor.saw_global_step(5);
  // What each ps holds now: the restore must bring back one and leave the other as it is.
  const std::string on_ps1 = m.w.node()->requested_device.find("task:1") != std::string::npos ? "w" : "b";
  const std::vector<float> kept = values_of(session.run({on_ps1 == "w" ? m.b : m.w})[0]);

  c.node("ps:1").signal(SIGKILL);
  BOOST_TEST(c.node("ps:1").wait_exit(10s).has_value());
  c.start("ps:1");  // a new process: its variables are gone
  const float loss = supervisor.run([&] { return m.train_step(session); });
  BOOST_TEST(std::isfinite(loss));
  BOOST_TEST_REQUIRE(told.size() == 1u);
  const Recovery& r = told[0];
  BOOST_TEST((r.tasks == std::vector<std::string>{"ps:1"}));
  BOOST_TEST(r.addresses[0] == fmt::format("127.0.0.1:{}", c.port("ps:1")));
  BOOST_TEST(r.checkpoint == dir + "/ckpt-3");
  BOOST_TEST(r.restored_step == 3);
  BOOST_TEST(r.lost_steps == 2);
  BOOST_TEST(r.variables >= 1u);
  BOOST_TEST(r.seconds_back <= r.seconds_restored);
  BOOST_TEST(r.seconds_restored <= r.seconds_to_step);
  BOOST_TEST(contains(r.describe(), "recovered from the loss of ps:1"), r.describe());
  BOOST_TEST(supervisor.recoveries().size() == 1u);
  // ps:0's variable went on from where it was (one more step), not from the checkpoint's value.
  const std::vector<float> after = values_of(session.run({on_ps1 == "w" ? m.b : m.w})[0]);
  BOOST_TEST(after != kept);
}

BOOST_AUTO_TEST_CASE(a_ps_that_does_not_come_back_or_has_no_checkpoint_fails_the_step_naming_it) {
  TwoPsCluster c;
  Model m;
  Session session(m.root, c.session());
  session.run({}, {}, {m.init});
  Saver saver(session);
  Supervisor supervisor(session, &saver, {.checkpoint_dir = c.dir().file("none"), .grace = 1500ms});
  c.node("ps:1").signal(SIGKILL);
  BOOST_TEST(c.node("ps:1").wait_exit(10s).has_value());
  auto m1 = error_of([&] { supervisor.run([&] { return m.train_step(session); }); }, ErrorCode::unavailable);
  BOOST_TEST(contains(m1, "ps:1"), m1);
  BOOST_TEST(contains(m1, "did not come back within 1.5 s"), m1);
  c.start("ps:1");
  auto m2 = error_of([&] { supervisor.run([&] { return m.train_step(session); }); }, ErrorCode::data_loss);
  BOOST_TEST(contains(m2, "task(s) ps:1 run a new process and their variables are lost, with no checkpoint in"), m2);
}

BOOST_AUTO_TEST_CASE(a_parameter_shard_that_throws_is_restarted_in_place_and_its_task_restored_from_the_checkpoint) {
  // The 4th optimizer step of 'b' throws inside its shard (a failpoint, in the nodes' processes only).
  BOOST_REQUIRE(setenv("TROUPE_FAILPOINTS", "param_shard.optimizer_step:b:4", 1) == 0);
  std::optional<TwoPsCluster> started;
  try {
    started.emplace();
  } catch (...) {
    unsetenv("TROUPE_FAILPOINTS");
    throw;
  }
  BOOST_REQUIRE(unsetenv("TROUPE_FAILPOINTS") == 0);
  TwoPsCluster& c = *started;
  Model m;
  Session session(m.root, c.session());
  Saver saver(session);
  const std::string dir = m.three_steps_saved(session, saver, c);
  const std::string b_task = m.b.node()->requested_device.find("task:1") != std::string::npos ? "ps:1" : "ps:0";
  std::vector<Recovery> told;
  Supervisor supervisor(session, &saver,
                        {.checkpoint_dir = dir, .grace = 20s, .on_recovery = [&](const Recovery& r) { told.push_back(r); }});
  supervisor.saw_global_step(3);
  // The 4th step fails in b's shard; the shard starts again empty, the same process and handle,
  // and the supervisor restores b's task from ckpt-3 and runs the step again.
  for (int i = 0; i < 3; ++i) BOOST_TEST(std::isfinite(supervisor.run([&] { return m.train_step(session); })));
  BOOST_TEST(c.node(b_task).wait_for_output("started on", 1s));  // still the first process
  const std::string err = c.node(b_task).err();
  BOOST_TEST(contains(err, "the parameter shard failed (failpoint param_shard.optimizer_step of variable 'b') and was "
                           "restarted empty in place"),
             err);
  BOOST_TEST_REQUIRE(told.size() == 1u);
  BOOST_TEST((told[0].tasks == std::vector<std::string>{b_task}), told[0].describe());
  BOOST_TEST(told[0].checkpoint == dir + "/ckpt-3");
  BOOST_TEST_MESSAGE(told[0].describe());
  BOOST_TEST(told[0].variables >= 1u);
  // Training goes on from the restored values: three more steps after the failure.
  BOOST_TEST(session.run({m.step.value})[0].scalar_value<int64_t>() >= 5);
}

BOOST_AUTO_TEST_CASE(a_ps_that_does_not_come_back_is_taken_over_by_a_spare_and_training_goes_on) {
  troupe::testing::NodeCluster c({{"worker", 1}, {"ps", 2}, {"spare", 1}});
  Model m;
  Session session(m.root, c.session_on("worker:0"));
  Saver saver(session);
  const std::string dir = m.three_steps_saved(session, saver, c);
  const std::string on_ps1 = m.w.node()->requested_device.find("task:1") != std::string::npos ? "w" : "b";
  std::vector<Recovery> told;
  Supervisor supervisor(session, &saver,
                        {.checkpoint_dir = dir, .grace = 2s, .on_recovery = [&](const Recovery& r) { told.push_back(r); }});
  supervisor.saw_global_step(3);
  const std::vector<float> kept = values_of(session.run({on_ps1 == "w" ? m.b : m.w})[0]);
  c.node("ps:1").signal(SIGKILL);  // and never started again
  BOOST_TEST(c.node("ps:1").wait_exit(10s).has_value());
  for (int i = 0; i < 2; ++i) BOOST_TEST(std::isfinite(supervisor.run([&] { return m.train_step(session); })));
  BOOST_TEST_REQUIRE(told.size() == 1u);
  const Recovery& r = told[0];
  BOOST_TEST_MESSAGE(r.describe());
  BOOST_TEST((r.tasks == std::vector<std::string>{"ps:1"}));
  BOOST_TEST((r.spares == std::vector<std::string>{"spare:0"}));
  BOOST_TEST(r.addresses[0] == fmt::format("127.0.0.1:{}", c.port("spare:0")));
  BOOST_TEST(r.checkpoint == dir + "/ckpt-3");
  BOOST_TEST(contains(r.describe(), "on spare:0, which took it over"), r.describe());
  BOOST_TEST(c.node("spare:0").wait_for_output("takes over task ps:1", 1s), c.node("spare:0").out());
  BOOST_TEST(c.node("ps:0").wait_for_output("task ps:1 runs at 127.0.0.1:", 1s), c.node("ps:0").out());
  // ps:0's variable went on (one more step than before the loss), and a new session (another
  // master) finds ps:1 where the spare runs it.
  BOOST_TEST(values_of(session.run({on_ps1 == "w" ? m.b : m.w})[0]) != kept);
  Session later(m.root, c.session_on("worker:0"));
  BOOST_TEST(std::isfinite(m.train_step(later)));
  // A member started after the move reads the old spec: its session still finds ps:1 on the
  // spare (ps:0 knows), and the spare is no task of its own.
  c.node("worker:0").signal(SIGKILL);
  BOOST_TEST(c.node("worker:0").wait_exit(10s).has_value());
  c.start("worker:0");
  Session fresh(m.root, c.session_on("worker:0"));
  BOOST_TEST(std::isfinite(m.train_step(fresh)));
}
