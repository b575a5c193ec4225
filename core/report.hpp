#pragma once
// What the runtime tells when no caller asked to hear it (a slow step, a lost replica, a shard
// restarted, a refused peer) and no sink was given: one line on standard error, "troupe: LINE",
// flushed at once. And how a wait is told: when it begins, then every kWaitingNotice.
#include <chrono>
#include <cstdio>
#include <optional>
#include <string>

namespace troupe {

inline void report_to_stderr(const std::string& line) {
  std::fprintf(stderr, "troupe: %s\n", line.c_str());
  std::fflush(stderr);
}

// How often a process that waits for another (a task at a session's start, a lost task, the chief)
// says it still does.
inline constexpr std::chrono::seconds kWaitingNotice{10};

// One wait's notices: due() says whether a line is to be told now (the first time, then once
// kWaitingNotice has passed since the last) and counts it told; first() whether that line is the
// wait's first ("waiting for ...", then "still waiting for ..."). Not thread-safe: one waiter.
class WaitNotice {
 public:
  bool due() {
    const auto now = std::chrono::steady_clock::now();
    if (told_ && now - *told_ < kWaitingNotice) return false;
    first_ = !told_;
    told_ = now;
    return true;
  }
  bool first() const { return first_; }
  void reset() { told_.reset(); }

 private:
  std::optional<std::chrono::steady_clock::time_point> told_;
  bool first_ = true;
};

}  // namespace troupe
