#include "train/hooks.hpp"

#include <unistd.h>

#include <cmath>

#include <fmt/format.h>

#include "core/error.hpp"
#include "core/summary/event_writer.hpp"

namespace troupe::train {

namespace {
using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }
}  // namespace

std::string clock_text(double seconds) {
  const int s = int(std::lround(std::max(0.0, seconds)));
  return fmt::format("{}:{:02}", s / 60, s % 60);
}

// ---- CheckpointHook

CheckpointHook::CheckpointHook(Options options) : options_(options) {
  TROUPE_CHECK_ARG(options_.every_steps >= 0 && options_.every_seconds.count() >= 0,
                   "CheckpointHook: every {} steps, every {} s", options_.every_steps, options_.every_seconds.count());
}

void CheckpointHook::begin(TrainingSession& s) {
  if (!s.is_chief()) return;
  if (s.options().checkpoint_dir.empty())
    fail(ErrorCode::invalid_argument, "a CheckpointHook needs TrainingOptions::checkpoint_dir");
  // A run resumed at step N has its checkpoint of step N already.
  saved_step_ = s.resumed_from().empty() ? -1 : s.global_step();
  if (!s.resumed_from().empty()) newest_ = s.resumed_from();
  saved_at_ = Clock::now();
}

bool CheckpointHook::try_save(TrainingSession& s, const std::function<void()>& save) {
  try {
    save();
    failing_since_.reset();
    return true;
  } catch (const Error& e) {
    if (!s.supervised() || (e.code() != ErrorCode::unavailable && e.code() != ErrorCode::failed_precondition)) throw;
    if (!failing_since_) failing_since_ = Clock::now();
    const double failing = seconds_since(*failing_since_);
    const double bound = 2 * std::chrono::duration<double>(s.options().recovery_grace).count() + 10;
    if (failing > bound)
      fail(e.code(), "{}: no checkpoint could be written into {} for {:.1f} s (a lost task did not come back within "
           "{:.0f} s): {}", s.where().task_name(), s.options().checkpoint_dir, failing, bound, e.what());
    s.message(fmt::format("a checkpoint was not written (it is tried again at the next step): {}", e.what()));
    return false;
  }
}

void CheckpointHook::after_step(TrainingSession& s, const StepInfo& info) {
  if (!s.is_chief()) return;
  const bool by_steps = options_.every_steps > 0 &&
                        (saved_step_ < 0 ? info.global_step / options_.every_steps > 0
                                         : info.global_step / options_.every_steps != saved_step_ / options_.every_steps);
  const bool by_time = options_.every_seconds.count() > 0 && Clock::now() - saved_at_ >= options_.every_seconds;
  if (!save_again_ && !by_steps && !by_time) return;
  if (saving_.valid())
    try_save(s, [&] {
      newest_ = saving_.get();
      ++written_;
    });
  save_again_ = !try_save(s, [&] { saving_ = s.save_async(); });
  saved_step_ = info.global_step;
  saved_at_ = Clock::now();
}

void CheckpointHook::end(TrainingSession& s) {
  if (!s.is_chief()) return;
  if (saving_.valid() && !try_save(s, [&] {
        newest_ = saving_.get();
        ++written_;
      }))
    save_again_ = true;
  if (options_.at_end && (saved_step_ != s.global_step() || save_again_)) {
    newest_ = s.save();  // through the supervisor: a lost task is waited for and restored
    ++written_;
    saved_step_ = s.global_step();
  }
  if (written_ == 0 && newest_.empty())
    fail(ErrorCode::data_loss, "asked to save checkpoints into {}, and none was written", s.options().checkpoint_dir);
}

std::string CheckpointHook::summary(const std::string& dir) const {
  if (written_ == 0) return fmt::format("no checkpoint written into {}", dir);
  return fmt::format("{} checkpoint(s) written into {}, the newest {}", written_, dir, newest_);
}

// ---- StopAtStep

void StopAtStep::begin(TrainingSession& s) {
  if (s.global_step() >= last_step_) s.request_stop();
}

void StopAtStep::after_step(TrainingSession& s, const StepInfo& info) {
  if (info.global_step >= last_step_) s.request_stop();
}

// ---- EvaluationHook

EvaluationHook::EvaluationHook(EvaluationOptions options) : options_(std::move(options)) {
  TROUPE_CHECK_ARG(options_.input || options_.batches > 0,
                   "EvaluationHook: with no input, say how many batches the metrics read (EvaluationOptions::batches)");
}

std::map<std::string, double> EvaluationHook::evaluate(TrainingSession& s) {
  const Model& model = s.model();
  if (model.metrics.empty()) fail(ErrorCode::invalid_argument, "an EvaluationHook needs Model::metrics");
  std::vector<TensorName> fetches;
  for (auto& [name, out] : model.metrics) fetches.push_back(out);
  const std::vector<Output>& inputs = model.eval_inputs.empty() ? model.inputs : model.eval_inputs;
  std::vector<double> sums(fetches.size(), 0.0);
  double weight = 0;
  std::unique_ptr<data::Iterator> input = options_.input ? options_.input() : nullptr;
  for (int64_t b = 0; options_.batches == 0 || b < options_.batches; ++b) {
    FeedList feeds;
    double rows = 1;
    if (input) {
      std::optional<data::Element> batch = input->next();
      if (!batch) break;
      if (batch->size() != inputs.size())
        fail(ErrorCode::invalid_argument, "an evaluation batch of {} component(s) for the model's {} evaluation input(s)",
             batch->size(), inputs.size());
      for (std::size_t i = 0; i < batch->size(); ++i) feeds.push_back({inputs[i], (*batch)[i]});
      rows = (*batch)[0].shape().rank() > 0 ? double((*batch)[0].shape().dim(0)) : 1.0;
    }
    std::vector<Tensor> out = s.run(feeds, fetches);
    for (std::size_t i = 0; i < out.size(); ++i) {
      const Tensor& t = out[i];
      const double v = t.dtype() == DType::float64 ? t.scalar_value<double>() : double(t.scalar_value<float>());
      sums[i] += v * rows;
    }
    weight += rows;
  }
  if (weight == 0) fail(ErrorCode::out_of_range, "the evaluation input gave no batch");
  std::map<std::string, double> result;
  for (std::size_t i = 0; i < fetches.size(); ++i) {
    result[model.metrics[i].first] = sums[i] / weight;
    s.report_scalar("eval/" + model.metrics[i].first, sums[i] / weight, s.global_step());
  }
  last_ = result;
  last_step_ = s.global_step();
  if (options_.on_result) options_.on_result(s.global_step(), result);
  return result;
}

void EvaluationHook::after_step(TrainingSession& s, const StepInfo& info) {
  if (!s.is_chief() || options_.every_steps <= 0 || info.global_step % options_.every_steps != 0) return;
  evaluate(s);
}

void EvaluationHook::end(TrainingSession& s) {
  if (s.is_chief() && options_.at_end && last_step_ != s.global_step()) evaluate(s);
}

// ---- TensorBoardHook

TensorBoardHook::TensorBoardHook(std::string logdir) : logdir_(std::move(logdir)) {}
TensorBoardHook::~TensorBoardHook() = default;

void TensorBoardHook::begin(TrainingSession& s) {
  if (!s.is_chief()) return;
  writer_ = std::make_shared<EventWriter>(logdir_);
  s.add_scalar_sink([w = writer_](const std::string& tag, double value, int64_t step) { w->scalar(tag, value, step); });
}

void TensorBoardHook::end(TrainingSession&) {
  if (writer_) writer_->flush();
}

// ---- ProgressHook

ProgressHook::ProgressHook(Options options) : options_(options) {}

void ProgressHook::begin(TrainingSession& s) {
  format_ = options_.format;
  if (format_ == Format::automatic) format_ = ::isatty(::fileno(options_.out)) ? Format::tty : Format::plain;
  start_ = last_ = Clock::now();
  first_step_ = last_step_ = s.global_step();
}

void ProgressHook::after_step(TrainingSession& s, const StepInfo& info) {
  loss_ = steps_ == 0 ? info.loss : 0.95 * loss_ + 0.05 * info.loss;
  ++steps_;
  if (!s.is_chief()) return;
  const int64_t last = s.options().last_step;
  if (seconds_since(last_) >= std::chrono::duration<double>(options_.every).count() ||
      (last > 0 && info.global_step >= last))
    report(s, info);
}

void ProgressHook::report(TrainingSession& s, const StepInfo& info) {
  const double since = seconds_since(last_);
  const double steps_per_s = since > 0 ? double(info.global_step - last_step_) / since : 0;
  examples_per_s_ = steps_per_s * double(info.examples) * s.replicas_per_step();
  const bool sync = s.strategy() == Strategy::sync_replicas;
  int64_t dropped = 0;
  if (sync)
    for (int64_t d : s.dropped_per_worker()) dropped += d;
  const int64_t last = s.options().last_step;
  const bool cluster = !s.where().local();
  switch (format_) {
    case Format::tty: {
      std::string line = last > 0 ? fmt::format("step {}/{}", info.global_step, last)
                                  : fmt::format("step {}", info.global_step);
      line += fmt::format("  loss {:.4f}  {:.0f} examples/s", loss_, examples_per_s_);
      if (sync) line += fmt::format("  dropped {}", dropped);
      if (last > 0 && steps_per_s > 0) line += "  ETA " + clock_text(double(last - info.global_step) / steps_per_s);
      std::fprintf(options_.out, "\r%-90s", line.c_str());
      drawn_ = true;
      break;
    }
    case Format::plain:
      std::fprintf(options_.out, "progress: global step %lld%s, %.0f examples/s, loss %.4f%s\n",
                   (long long)info.global_step, last > 0 ? fmt::format("/{}", last).c_str() : "", examples_per_s_,
                   loss_, cluster ? fmt::format(", dropped gradients {}", dropped).c_str() : "");
      break;
    case Format::json:
      std::fprintf(options_.out,
                   "{\"global_step\":%lld,\"last_step\":%lld,\"examples_per_s\":%.1f,\"loss\":%.6g,\"dropped_gradients\":%lld}\n",
                   (long long)info.global_step, (long long)last, examples_per_s_, loss_, (long long)dropped);
      break;
    case Format::automatic: break;
  }
  std::fflush(options_.out);
  s.report_scalar("train/loss", loss_, info.global_step);
  s.report_scalar("train/examples_per_s", examples_per_s_, info.global_step);
  s.report_scalar("train/global_steps_per_s", steps_per_s, info.global_step);
  if (sync) s.report_scalar("train/dropped_gradients", double(dropped), info.global_step);
  if (options_.on_report)
    options_.on_report({.global_step = info.global_step, .loss = loss_, .examples_per_s = examples_per_s_,
                        .global_steps_per_s = steps_per_s, .dropped = sync ? dropped : -1});
  last_ = Clock::now();
  last_step_ = info.global_step;
}

void ProgressHook::end(TrainingSession&) {
  if (drawn_) std::fprintf(options_.out, "\r%-90s\r", "");
  drawn_ = false;
  std::fflush(options_.out);
}

}  // namespace troupe::train
