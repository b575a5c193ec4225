#pragma once
// State that loop kinds (next_iteration_node, loop_invariant_node, exit_node) keep per loop
// invocation: per (step, frame id), freed when the frame is over or the step is aborted.
#include <cstdint>
#include <map>
#include <utility>
#include <vector>

namespace troupe {

using FrameKey = std::pair<uint64_t, uint64_t>;  // (step, frame id)

template <class State>
using PerFrame = std::map<FrameKey, State>;

// Forgets every frame of `step`.
template <class State>
void erase_step(PerFrame<State>& per_frame, uint64_t step) {
  per_frame.erase(per_frame.lower_bound({step, 0}), per_frame.upper_bound({step, UINT64_MAX}));
}

// Which iterations of a frame have finished (the iteration gate says so, in any order).
struct FinishedIterations {
  int64_t below = 0;           // iterations below this one have all finished
  std::vector<int64_t> above;  // finished out of order
  void finish(int64_t iteration);
};

}  // namespace troupe
