#pragma once
// Waits, at most 5 s, until no node actor of the session holds any step and the executables
// hold no loop frame and no value saved for a loop's gradient (state of finished or failed
// steps is freed everywhere). Returns whether it got there.
#include <chrono>
#include <thread>

#include "actors/session.hpp"

namespace troupe::testing {

inline bool settles(const Session& s) {
  for (int i = 0; i < 500; ++i) {
    auto loops = s.loop_state();
    if (s.waiting_nodes().empty() && loops.frames == 0 && loops.saved_values == 0) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

}  // namespace troupe::testing
