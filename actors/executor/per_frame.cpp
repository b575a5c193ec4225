#include "actors/executor/per_frame.hpp"

#include <algorithm>

namespace troupe {

void FinishedIterations::finish(int64_t iteration) {
  if (iteration != below) {
    above.push_back(iteration);
    return;
  }
  ++below;
  std::sort(above.begin(), above.end());
  std::size_t used = 0;
  while (used < above.size() && above[used] == below) ++below, ++used;
  above.erase(above.begin(), above.begin() + std::ptrdiff_t(used));
}

}  // namespace troupe
