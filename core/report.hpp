#pragma once
// What the runtime tells when no caller asked to hear it (a slow step, a lost replica, a shard
// restarted, a refused peer) and no sink was given: one line on standard error, "troupe: LINE",
// flushed at once.
#include <cstdio>
#include <string>

namespace troupe {

inline void report_to_stderr(const std::string& line) {
  std::fprintf(stderr, "troupe: %s\n", line.c_str());
  std::fflush(stderr);
}

}  // namespace troupe
