// The training session alone (train/training_session.hpp) and its hooks (train/hooks.hpp): it
// trains to its last step, checkpoints and resumes where it stopped, evaluates, reports scalars,
// and refuses what it cannot run by name. Its strategies on a cluster run in real processes in
// train_residual_test.sh.
#include <boost/test/unit_test.hpp>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>

#include "ops/all.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/scratch_dir.hpp"
#include "train/hooks.hpp"
#include "train/training_session.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

// y = 3x - 1 by one weight and one bias; the metric is the batch's mean of x (known exactly).
train::Model line_model(const Scope& s) {
  auto x = ops::placeholder(s.with_op_name("x"), DType::float32, PartialShape{-1, 1});
  auto y = ops::placeholder(s.with_op_name("y"), DType::float32, PartialShape{-1, 1});
  auto w = ops::variable(s.with_op_name("w"), {1, 1}, DType::float32);
  ops::set_initializer(w, ops::assign(s, w, ops::fill(s, {1, 1}, ops::constant(s, 0.0f))));
  auto b = ops::variable(s.with_op_name("b"), {1}, DType::float32);
  ops::set_initializer(b, ops::assign(s, b, ops::constant<float>(s, {0.0f}, {1})));
  auto loss = ops::mean(s, ops::square(s, ops::sub(s, ops::add(s, ops::matmul(s, x, w), b), y)));
  return {.loss = loss, .inputs = {x, y}, .metrics = {{"mean_x", ops::mean(s, x)}}};
}

// Batches of `rows` examples of the line, x = i / rows for i in 0..rows-1, forever.
class LineBatches : public data::Iterator {
 public:
  explicit LineBatches(int64_t rows, float bad = 0) : rows_(rows), bad_(bad) {}
  std::optional<data::Element> next() override {
    std::vector<float> x(static_cast<std::size_t>(rows_), 0.0f), y(x);
    for (int64_t i = 0; i < rows_; ++i) {
      x[std::size_t(i)] = float(i) / float(rows_);
      y[std::size_t(i)] = 3 * x[std::size_t(i)] - 1 + bad_;
    }
    return data::Element{Tensor::from_vector<float>(x, {rows_, 1}), Tensor::from_vector<float>(y, {rows_, 1})};
  }

 private:
  int64_t rows_;
  float bad_;
};

// The batches given, then the end.
class Listed : public data::Iterator {
 public:
  explicit Listed(std::vector<data::Element> batches) : batches_(std::move(batches)) {}
  std::optional<data::Element> next() override {
    if (next_ == batches_.size()) return std::nullopt;
    return batches_[next_++];
  }

 private:
  std::vector<data::Element> batches_;
  std::size_t next_ = 0;
};

data::Element column(std::vector<float> x) {
  const int64_t n = int64_t(x.size());
  return {Tensor::from_vector<float>(x, {n, 1}), Tensor::from_vector<float>(std::vector<float>(x.size(), 0.0f), {n, 1})};
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_model_trains_alone_to_its_last_step_and_its_loss_falls) {
  train::TrainingSession session(train::ClusterConfig{}, Optimizer::sgd(0.5), line_model, {.last_step = 200});
  BOOST_TEST(session.is_chief());
  BOOST_TEST((session.strategy() == train::Strategy::local));
  LineBatches input(16);
  const float first = session.step(*input.next()).loss;
  session.train(input);
  BOOST_TEST(session.global_step() == 200);
  const float last = session.step(*input.next()).loss;
  BOOST_TEST(last < first / 100, "loss " << first << " -> " << last);
}

BOOST_AUTO_TEST_CASE(checkpoints_come_every_n_steps_and_a_new_session_resumes_from_the_newest_where_its_input_left) {
  testing::ScratchDir dir;
  const std::string ck = dir.file("ckpt");
  {
    train::TrainingSession session(train::ClusterConfig{}, Optimizer::sgd(0.5), line_model,
                                   {.last_step = 250, .checkpoint_dir = ck});
    auto hook = std::make_shared<train::CheckpointHook>(train::CheckpointHook::every_steps(100));
    session.add_hook(hook);
    LineBatches input(8);
    session.train(input);
    BOOST_TEST(hook->written() == 3);  // 100, 200, and the end at 250
    BOOST_TEST(hook->newest() == ck + "/ckpt-250");
  }
  train::TrainingSession resumed(train::ClusterConfig{}, Optimizer::sgd(0.5), line_model,
                                 {.last_step = 300, .checkpoint_dir = ck});
  BOOST_TEST(resumed.global_step() == 250);
  BOOST_TEST(resumed.resumed_from() == ck + "/ckpt-250");
  const data::Position at = resumed.input_position(100);
  BOOST_TEST(at.epoch == 2);
  BOOST_TEST(at.elements == 50);
  // The weights came back: the loss is where training left it, not where it began.
  LineBatches input(8);
  BOOST_TEST(resumed.step(*input.next()).loss < 0.01f);
}

BOOST_AUTO_TEST_CASE(a_stop_before_the_last_step_still_saves_and_evaluates_at_the_end) {
  testing::ScratchDir dir;
  train::TrainingSession session(train::ClusterConfig{}, Optimizer::sgd(0.5), line_model,
                                 {.last_step = 1000, .checkpoint_dir = dir.path()});
  auto checkpoints = std::make_shared<train::CheckpointHook>(train::CheckpointHook::every_steps(0));
  auto evaluation = std::make_shared<train::EvaluationHook>(
      train::EvaluationOptions{.input = [] { return std::make_unique<LineBatches>(4); }, .batches = 2});
  session.add_hook(checkpoints);
  session.add_hook(evaluation);
  session.add_hook(std::make_shared<train::StopAtStep>(30));
  LineBatches input(4);
  session.train(input);
  BOOST_TEST(session.global_step() == 30);
  BOOST_TEST(checkpoints->written() == 1);
  BOOST_TEST(checkpoints->newest() == dir.path() + "/ckpt-30");
  BOOST_TEST(evaluation->last_step() == 30);
}

BOOST_AUTO_TEST_CASE(an_evaluation_weighs_each_batch_by_its_rows_and_every_scalar_reaches_the_sinks) {
  train::TrainingSession session(train::ClusterConfig{}, Optimizer::sgd(0.1), line_model, {.last_step = 40});
  std::map<std::string, std::vector<std::pair<int64_t, double>>> seen;
  session.add_scalar_sink([&](const std::string& tag, double v, int64_t step) { seen[tag].push_back({step, v}); });
  // Batches of 1 row (x = 1) and 3 rows (x = 0): the mean over the rows is 0.25; over the batches it would be 0.5.
  auto evaluation = std::make_shared<train::EvaluationHook>(train::EvaluationOptions{
      .every_steps = 20, .input = [] { return std::make_unique<Listed>(std::vector{column({1}), column({0, 0, 0})}); }});
  std::FILE* sink = std::tmpfile();
  session.add_hook(std::make_shared<train::ProgressHook>(
      train::ProgressHook::Options{.format = train::ProgressHook::Format::json, .every = std::chrono::milliseconds(0), .out = sink}));
  session.add_hook(evaluation);
  LineBatches input(4);
  session.train(input);
  BOOST_TEST(evaluation->last().at("mean_x") == 0.25, "mean_x " << evaluation->last().at("mean_x"));
  BOOST_TEST(seen["eval/mean_x"].size() == 2u);  // at 20 and 40; the end has evaluated step 40 already
  BOOST_TEST(seen["eval/mean_x"].back().first == 40);
  BOOST_TEST(seen["train/loss"].size() == 40u);
  BOOST_TEST(seen.count("train/examples_per_s") == 1u);
  std::rewind(sink);
  char line[512] = {};
  BOOST_TEST_REQUIRE(std::fgets(line, sizeof line, sink) != nullptr);
  BOOST_TEST(contains(line, "{\"global_step\":1,\"last_step\":40,"), line);
  std::fclose(sink);
}

BOOST_AUTO_TEST_CASE(a_damaged_newest_checkpoint_names_the_intact_one_and_the_option_that_restores_it) {
  testing::ScratchDir dir;
  {
    train::TrainingSession session(train::ClusterConfig{}, Optimizer::sgd(0.5), line_model,
                                   {.last_step = 20, .checkpoint_dir = dir.path()});
    session.add_hook(std::make_shared<train::CheckpointHook>(train::CheckpointHook::every_steps(10)));
    LineBatches input(4);
    session.train(input);
  }
  {
    std::fstream data(dir.path() + "/ckpt-20/shard-00000-of-00001.data", std::ios::in | std::ios::out | std::ios::binary);
    data.seekp(0);
    data.write("XXXX", 4);
  }
  const std::string e = error_of(
      [&] {
        train::TrainingSession(train::ClusterConfig{}, Optimizer::sgd(0.5), line_model,
                               {.checkpoint_dir = dir.path(), .restore_from_flag = "--from"});
      },
      ErrorCode::data_loss);
  BOOST_TEST(contains(e, dir.path() + "/ckpt-20"), e);
  BOOST_TEST(contains(e, "run again with --from ckpt-10"), e);
}

BOOST_AUTO_TEST_CASE(a_diverging_loss_fails_the_step_naming_its_global_step) {
  train::TrainingSession session(train::ClusterConfig{}, Optimizer::sgd(0.1), line_model, {});
  LineBatches nan_input(4, std::numeric_limits<float>::quiet_NaN());
  const std::string e = error_of([&] { session.step(*nan_input.next()); }, ErrorCode::aborted);
  BOOST_TEST(contains(e, "the loss diverged (nan) at global step 1"), e);
}

BOOST_AUTO_TEST_CASE(a_batch_that_does_not_match_the_inputs_is_refused_naming_both_counts) {
  train::TrainingSession session(train::ClusterConfig{}, Optimizer::sgd(0.1), line_model, {});
  const std::string e = error_of([&] { session.step({Tensor::from_vector<float>({1}, {1, 1})}); },
                                 ErrorCode::invalid_argument);
  BOOST_TEST(contains(e, "a batch of 1 component(s) for the model's 2 input(s)"), e);
}

BOOST_AUTO_TEST_CASE(a_strategy_the_cluster_cannot_run_is_refused_by_name_before_anything_starts) {
  ClusterSpec no_ps = ClusterSpec::from_json(R"({"cluster": {"worker": ["127.0.0.1:1", "127.0.0.1:2"]}})", "spec.json");
  const train::ClusterConfig worker(no_ps, parse_task_id("worker:1"), "--cluster spec.json");
  std::string e = error_of(
      [&] { train::TrainingSession(worker, Optimizer::sgd(0.1), line_model, {.strategy = train::Strategy::sync_replicas}); },
      ErrorCode::invalid_argument);
  BOOST_TEST(contains(e, "the sync strategy needs parameter servers, and the spec of --cluster spec.json has no ps job"), e);
  e = error_of([&] { train::TrainingSession(worker, Optimizer::sgd(0.1), line_model, {.strategy = train::Strategy::local}); },
               ErrorCode::invalid_argument);
  BOOST_TEST(contains(e, "the local strategy trains one process"), e);
  e = error_of(
      [&] {
        train::TrainingSession(worker, Optimizer::sgd(0.1), line_model,
                               {.strategy = train::Strategy::allreduce, .backup_workers = 1});
      },
      ErrorCode::invalid_argument);
  BOOST_TEST(contains(e, "backup workers are for the sync strategy, not allreduce"), e);
  e = error_of([] { train::parse_strategy("ring"); }, ErrorCode::invalid_argument);
  BOOST_TEST(contains(e, "'ring' is not a training strategy: local, async, sync or allreduce"), e);
}

