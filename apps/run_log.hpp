#pragma once
// What troupe-fashion-mnist tells as it trains, besides its printed lines: TensorBoard scalars
// (--logdir) and report.html (--report, or LOGDIR/report.html), the points of both taken here.
#include <chrono>
#include <memory>
#include <optional>
#include <string>

#include "apps/fashion_mnist.hpp"
#include "apps/report.hpp"
#include "core/summary/event_writer.hpp"

namespace troupe::app {

class RunLog {
 public:
  // `title`: what the report calls the run. Opens the event files if --logdir.
  RunLog(const Args& a, std::string title);
  // The loss averaged since the last call, the rate over that stretch, at global step `step`;
  // `dropped`: sync training's dropped gradients so far (negative: none to tell).
  void train(int64_t step, double loss, double examples_per_s, double learning_rate, int64_t dropped = -1);
  void accuracy(int64_t step, double value);
  // The run ended so (a line in the report): writes the report, if one is wanted, and says where.
  void finish(const std::string& outcome);

 private:
  const Args& a_;
  std::optional<EventWriter> events_;
  std::string report_path_;
  TrainingReport report_;
  std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  double seconds() const;
};

}  // namespace troupe::app
