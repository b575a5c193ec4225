#pragma once
// The hooks a training program adds to its TrainingSession (train/training_session.hpp):
//
//   session.add_hook(std::make_shared<train::TensorBoardHook>("logs"));        // first: others report to it
//   session.add_hook(std::make_shared<train::ProgressHook>());                 // tty bar, plain lines or JSON
//   session.add_hook(std::make_shared<train::CheckpointHook>(train::CheckpointHook::every_steps(500)));
//   session.add_hook(std::make_shared<train::EvaluationHook>(
//       train::EvaluationOptions{.every_steps = 1000, .input = [&] { return test.begin(); }}));
//   session.add_hook(std::make_shared<train::StopAtStep>(3000));
//
// Each hook that belongs to the chief (checkpoints, evaluation, TensorBoard, progress) does
// nothing on the other workers. Scalars go to the session's sinks (TensorBoardHook is one):
// train/loss, train/examples_per_s, train/dropped_gradients (sync), train/global_steps_per_s,
// eval/NAME for each metric.
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "ops/data/pipeline.hpp"
#include "train/training_session.hpp"

namespace troupe {
class EventWriter;
}

namespace troupe::train {

// Saves a checkpoint into TrainingOptions::checkpoint_dir (the chief's) every N global steps
// and/or every T seconds, in the background while training goes on, one save at a time: a
// save's error surfaces when the next is due or at the end. At the end the last step is saved
// (through the supervisor: a lost ps task is waited for and restored first) unless it is
// already. A save that fails in a way no recovery mends (the directory cannot be written, the
// disk is full) fails the training; one a lost ps task explains (unavailable,
// failed_precondition) is tried again at the next step while the supervisor brings the task
// back, for at most 2 x recovery_grace + 10 s.
class CheckpointHook : public Hook {
 public:
  struct Options {
    int64_t every_steps = 0;                 // 0: not by steps
    std::chrono::seconds every_seconds{0};   // 0: not by time
    bool at_end = true;                      // save the last step at close()
  };
  static Options every_steps(int64_t steps) { return {.every_steps = steps}; }
  static Options every_seconds(std::chrono::seconds s) { return {.every_seconds = s}; }
  explicit CheckpointHook(Options options);

  void begin(TrainingSession&) override;
  void after_step(TrainingSession&, const StepInfo&) override;
  void end(TrainingSession&) override;

  int64_t written() const { return written_; }
  // The newest checkpoint this run wrote, or the one it resumed from when it wrote none.
  const std::string& newest() const { return newest_; }
  // "3 checkpoint(s) written into DIR, the newest DIR/ckpt-1500", or that none was.
  std::string summary(const std::string& dir) const;

 private:
  bool try_save(TrainingSession& s, const std::function<void()>& save);
  Options options_;
  std::future<std::string> saving_;
  int64_t saved_step_ = -1;
  bool save_again_ = false;
  std::chrono::steady_clock::time_point saved_at_;
  std::optional<std::chrono::steady_clock::time_point> failing_since_;
  int64_t written_ = 0;
  std::string newest_;
};

// Stops the training once the global step reaches `last_step` (a stop before
// TrainingOptions::last_step: the checkpoint and evaluation at the end still run).
class StopAtStep : public Hook {
 public:
  explicit StopAtStep(int64_t last_step) : last_step_(last_step) {}
  void begin(TrainingSession& s) override;
  void after_step(TrainingSession& s, const StepInfo& info) override;

 private:
  int64_t last_step_;
};

struct EvaluationOptions {
  int64_t every_steps = 0;  // 0: only at the end
  bool at_end = true;
  // A new iterator over the evaluation input for each evaluation, its batches feeding
  // Model::eval_inputs (or Model::inputs); empty: the metrics read their own input in the graph.
  std::function<std::unique_ptr<data::Iterator>()> input;
  int64_t batches = 0;  // batches per evaluation; 0: the input's every batch (required without an input)
  // Told each evaluation's metrics (the chief's), after they are reported as eval/NAME.
  std::function<void(int64_t global_step, const std::map<std::string, double>&)> on_result;
};

// Evaluates Model::metrics on the chief: each metric's mean over the evaluation's batches
// (weighted by their rows when an input feeds them).
class EvaluationHook : public Hook {
 public:
  explicit EvaluationHook(EvaluationOptions options);
  void after_step(TrainingSession& s, const StepInfo& info) override;
  void end(TrainingSession& s) override;
  // Evaluates now; the metrics by name.
  std::map<std::string, double> evaluate(TrainingSession& s);
  const std::map<std::string, double>& last() const { return last_; }
  int64_t last_step() const { return last_step_; }

 private:
  EvaluationOptions options_;
  std::map<std::string, double> last_;
  int64_t last_step_ = -1;
};

// TensorBoard event files in `logdir` (the chief's): every scalar the hooks report. Add it
// before the hooks that report.
class TensorBoardHook : public Hook {
 public:
  explicit TensorBoardHook(std::string logdir);
  ~TensorBoardHook() override;
  void begin(TrainingSession& s) override;
  void end(TrainingSession& s) override;

 private:
  std::string logdir_;
  std::shared_ptr<EventWriter> writer_;
};

// A duration as "m:ss" (an ETA), rounded to the second; 0:00 for none.
std::string clock_text(double seconds);

// The chief's progress, every `every` and at the last step: the mean loss (a moving average
// over the steps), examples/s over the stretch, and for sync the gradients dropped so far.
//   tty   one line redrawn in place: "step 1200/3000  loss 0.4312  5123 examples/s  ETA 0:42"
//   plain "progress: global step 1200/3000, 5123 examples/s, loss 0.4312, dropped gradients 0"
//         (the lines troupe-launch shows as the job's progress)
//   json  {"global_step":1200,"last_step":3000,"examples_per_s":5123.0,"loss":0.4312,"dropped_gradients":0}
// auto: tty when standard output is a terminal, else plain. Reports train/loss,
// train/examples_per_s and train/global_steps_per_s (and train/dropped_gradients for sync).
class ProgressHook : public Hook {
 public:
  enum class Format { automatic, tty, plain, json };
  // What each report says.
  struct Report {
    int64_t global_step = 0;
    double loss = 0;            // the moving average
    double examples_per_s = 0;  // over the stretch since the last report, every worker's
    double global_steps_per_s = 0;
    int64_t dropped = -1;       // sync: gradients dropped so far; -1 otherwise
  };
  struct Options {
    Format format = Format::automatic;
    std::chrono::milliseconds every{2000};
    std::FILE* out = stdout;
    std::function<void(const Report&)> on_report;  // after each report is shown
  };
  ProgressHook() : ProgressHook(Options{}) {}
  explicit ProgressHook(Options options);
  void begin(TrainingSession& s) override;
  void after_step(TrainingSession& s, const StepInfo& info) override;
  void end(TrainingSession& s) override;
  double loss() const { return loss_; }  // the moving average
  double examples_per_s() const { return examples_per_s_; }

 private:
  void report(TrainingSession& s, const StepInfo& info);
  Options options_;
  Format format_ = Format::plain;
  double loss_ = 0;
  double examples_per_s_ = 0;
  int64_t steps_ = 0;
  std::chrono::steady_clock::time_point last_, start_;
  int64_t last_step_ = 0, first_step_ = 0;
  bool drawn_ = false;
};

}  // namespace troupe::train
