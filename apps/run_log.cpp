#include "apps/run_log.hpp"

#include <cstdio>
#include <ctime>

#include <fmt/format.h>

namespace troupe::app {

RunLog::RunLog(const Args& a, std::string title) : a_(a) {
  if (!a.logdir.empty()) events_.emplace(a.logdir);
  report_path_ = !a.report.empty() ? a.report : a.logdir.empty() ? std::string() : a.logdir + "/report.html";
  report_.title = std::move(title);
  std::time_t now = std::time(nullptr);
  char when[64];
  std::strftime(when, sizeof when, "%Y-%m-%d %H:%M:%S UTC", std::gmtime(&now));
  report_.started = when;
  report_.settings = {
      {"model", a.model},
      {"optimizer", fmt::format("{} (learning rate {}{})", a.optimizer, a.lr,
                                a.optimizer == "momentum" ? fmt::format(", momentum {}", a.momentum) : "")},
      {"batch", fmt::format("{} examples{}", a.batch, a.cluster.empty() ? "" : " per worker")},
      {"epochs", a.cluster.empty() ? std::to_string(a.epochs) : "-"},
      {"threads", a.threads > 0 ? std::to_string(a.threads) : "the cores this process may use"},
      {"input", a.prefetch > 0 ? fmt::format("{} batches read ahead, shuffle buffer {}", a.prefetch, a.shuffle_buffer)
                               : fmt::format("read in the loop, shuffle buffer {}", a.shuffle_buffer)},
      {"seed", std::to_string(a.seed)},
      {"data", a.data},
  };
  if (!a.cluster.empty()) {
    report_.settings.push_back({"cluster", fmt::format("{} (this report: {})", a.cluster, a.task)});
    report_.settings.push_back({"mode", a.mode + (a.backup_workers ? fmt::format(", {} backup worker(s)", a.backup_workers) : "")});
  }
  if (!a.checkpoint_dir.empty()) report_.settings.push_back({"checkpoints", a.checkpoint_dir});
  if (!a.logdir.empty()) report_.settings.push_back({"TensorBoard logdir", a.logdir});
  if (!a.trace.empty())
    report_.settings.push_back({"trace", fmt::format("{} (steps {}-{})", a.trace, a.trace_first, a.trace_last)});
}

double RunLog::seconds() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
}

void RunLog::train(int64_t step, double loss, double examples_per_s, double learning_rate, int64_t dropped) {
  const double t = seconds();
  report_.loss.push_back({step, t, loss});
  report_.examples_per_s.push_back({step, t, examples_per_s});
  if (!events_) return;
  events_->scalar("train/loss", loss, step);
  events_->scalar("train/examples_per_s", examples_per_s, step);
  events_->scalar("train/learning_rate", learning_rate, step);
  if (dropped >= 0) events_->scalar("train/dropped_gradients", double(dropped), step);
}

void RunLog::accuracy(int64_t step, double value) {
  report_.accuracy.push_back({step, seconds(), value});
  if (events_) events_->scalar("test/accuracy", value, step);
}

void RunLog::finish(const std::string& outcome) {
  if (report_path_.empty()) return;
  report_.outcome = outcome;
  if (!a_.trace.empty()) {
    try {
      report_.trace = summarize_trace_file(a_.trace);
      report_.trace_file = a_.trace;
      report_.traced_steps = fmt::format("training steps {}-{}{}", a_.trace_first, a_.trace_last,
                                         a_.cluster.empty() ? "" : " of " + a_.task);
    } catch (const std::exception& e) {
      report_.outcome += fmt::format(" (the trace was not read: {})", e.what());
    }
  }
  write_report(report_path_, report_);
  std::printf("report: %s\n", report_path_.c_str());
  std::fflush(stdout);
}

}  // namespace troupe::app
