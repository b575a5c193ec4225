#pragma once
// troupe-fashion-mnist's report.html: one self-contained page (inline SVG and CSS, nothing
// fetched) with the run's loss and accuracy against step and time, examples/s, the time per op
// type of the traced steps and the run's settings (docs/observability.md).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "apps/trace_summary.hpp"

namespace troupe::app {

struct ReportPoint {
  int64_t step = 0;
  double seconds = 0;  // since the training started
  double value = 0;
};

struct TrainingReport {
  std::string title;    // names the run: "troupe-fashion-mnist cnn, momentum lr 0.01, batch 64"
  std::string started;  // "2026-11-26 01:02:03 UTC"
  std::string outcome;  // one line: how it ended
  std::vector<std::pair<std::string, std::string>> settings;
  std::vector<ReportPoint> loss, accuracy, examples_per_s;
  std::optional<TraceSummary> trace;  // of the traced steps, if any
  std::string trace_file;
  std::string traced_steps;  // what the run calls them: "training steps 10-12"
};

// The page as text; write_report writes it to `path` (a temporary file, fsynced, renamed),
// throwing an Error naming the file.
std::string report_html(const TrainingReport& report);
void write_report(const std::string& path, const TrainingReport& report);

}  // namespace troupe::app
