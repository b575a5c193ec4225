#pragma once
// The flags every troupe-bench benchmark takes (--steps, --warmup, --threads, --json) and the
// walk over argv that hands a benchmark its own flags.
#include <algorithm>
#include <functional>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace troupe::bench {

struct CommonFlags {
  int steps = 10;
  int warmup = 2;
  int threads = 0;  // 0: the runtime's default
  bool json = false;
};

// `own(flag, value)` parses a benchmark's own flag, calling value() for its argument, and returns
// false for a flag it does not know; unknown flags and missing values fail naming the flag.
inline void parse_flags(int argc, char** argv, CommonFlags& common,
                        const std::function<bool(const std::string&, const std::function<std::string()>&)>& own) {
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    const std::function<std::string()> value = [&]() -> std::string {
      if (i + 1 >= argc) fail(ErrorCode::invalid_argument, "{} needs a value", k);
      return argv[++i];
    };
    if (k == "--steps") common.steps = std::stoi(value());
    else if (k == "--warmup") common.warmup = std::stoi(value());
    else if (k == "--threads") common.threads = std::stoi(value());
    else if (k == "--json") common.json = true;
    else if (!own(k, value)) fail(ErrorCode::invalid_argument, "unknown option '{}'", k);
  }
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
