#pragma once
// The flags every troupe-bench benchmark takes (--steps, --warmup, --threads, --json), added to
// its CLI11 command line, and the parse that ends the program on --help or a bad option.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <ctime>
#include <optional>
#include <string>
#include <vector>

#include "actors/session.hpp"
#include "apps/cli_checks.hpp"
#include "core/error.hpp"

namespace troupe::bench {

struct CommonFlags {
  int steps = 10;
  int warmup = 2;
  int threads = 0;  // 0: the runtime's default
  bool json = false;
  std::string trace;        // a Chrome trace of some steps here (SessionOptions::trace)
  std::string trace_steps;  // which: the session's run() calls A-B; empty: every timed step

  // SessionOptions::trace from --trace and --trace-steps; `first_timed` is the number of the
  // session's first timed run() call (the calls before it build and warm up).
  void apply_trace(SessionOptions& options, int first_timed) const {
    if (trace.empty()) return;
    options.trace.file = trace;
    if (trace_steps.empty()) {
      options.trace.first_step = uint64_t(first_timed);
      options.trace.last_step = uint64_t(first_timed + std::max(steps, 1) - 1);
      return;
    }
    const auto range = troupe::cli::step_range(trace_steps);
    if (!range) fail(ErrorCode::invalid_argument, "--trace-steps: '{}' is not a range of steps A-B (1 <= A <= B)", trace_steps);
    options.trace.first_step = uint64_t(range->first);
    options.trace.last_step = uint64_t(range->second);
  }
};

// Adds the flags every benchmark takes to its command line, each defaulting to what `common`
// holds (the benchmark's own defaults); `traced`: --trace and --trace-steps too (a benchmark of
// one session that calls apply_trace).
inline void add_common_flags(CLI::App& app, CommonFlags& common, bool traced = false) {
  app.option_defaults()->always_capture_default();
  app.add_option("--steps", common.steps, "timed steps")->check(troupe::cli::non_negative);
  app.add_option("--warmup", common.warmup, "untimed steps before them")->check(troupe::cli::non_negative);
  app.add_option("--threads", common.threads, "the runtime's threads (0: the cores this process may use)")
      ->check(troupe::cli::non_negative);
  app.add_flag("--json", common.json, "one JSON object a line instead of text");
  if (!traced) return;
  app.add_option("--trace", common.trace,
                 "write a Chrome trace of the --trace-steps steps here (traced steps are timed too: they cost a "
                 "little more)");
  app.add_option("--trace-steps", common.trace_steps,
                 "the session's run() calls traced, A-B, counted from 1 (the first builds the executable); default: "
                 "every timed step");
}

// Parses a benchmark's command line. Returns the code to exit with when it should not run: 0
// after --help (its options and defaults printed), CLI11's code after an unknown option or a bad
// value (the message, naming it, on stderr); nullopt to run.
inline std::optional<int> parse_command_line(CLI::App& app, int argc, char** argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  return std::nullopt;
}

// The median and the minimum of a benchmark's timings (an even count takes the mean of the two
// middle ones).
struct Summary {
  double median;
  double min;
};
inline Summary summarize(std::vector<double> times) {
  if (times.empty()) fail(ErrorCode::invalid_argument, "no timings to summarize");
  std::sort(times.begin(), times.end());
  const std::size_t n = times.size();
  return {n % 2 ? times[n / 2] : (times[n / 2 - 1] + times[n / 2]) / 2, times.front()};
}

// The CPU time this process has used, all its threads together, in microseconds.
inline double process_cpu_us() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) * 1e6 + double(t.tv_nsec) / 1e3;
}

}  // namespace troupe::bench
