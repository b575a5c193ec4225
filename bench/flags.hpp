#pragma once
// The flags every troupe-bench benchmark takes (--steps, --warmup, --threads, --json), added to
// its CLI11 command line, and the parse that ends the program on --help or a bad option.
#include <CLI/CLI.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "apps/cli_checks.hpp"
#include "core/error.hpp"

namespace troupe::bench {

struct CommonFlags {
  int steps = 10;
  int warmup = 2;
  int threads = 0;  // 0: the runtime's default
  bool json = false;
};

// Adds the flags every benchmark takes to its command line, each defaulting to what `common`
// holds (the benchmark's own defaults).
inline void add_common_flags(CLI::App& app, CommonFlags& common) {
  app.option_defaults()->always_capture_default();
  app.add_option("--steps", common.steps, "timed steps")->check(troupe::cli::non_negative);
  app.add_option("--warmup", common.warmup, "untimed steps before them")->check(troupe::cli::non_negative);
  app.add_option("--threads", common.threads, "the runtime's threads (0: the cores this process may use)")
      ->check(troupe::cli::non_negative);
  app.add_flag("--json", common.json, "one JSON object a line instead of text");
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

}  // namespace troupe::bench
