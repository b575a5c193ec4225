#include "devices/cpu_threads.hpp"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <thread>

namespace troupe {
namespace {

std::atomic<int>& setting() {
  static std::atomic<int> n{int(std::max(1u, std::thread::hardware_concurrency()))};
  return n;
}

}  // namespace

void set_intra_op_threads(int n) {
  n = std::max(1, n);
  setting().store(n);
  openblas_set_num_threads(n);
}

int intra_op_threads() { return setting().load(); }

void apply_intra_op_threads_here() {
  thread_local int applied = 0;
  int n = setting().load(std::memory_order_relaxed);
  if (applied != n) {
    omp_set_num_threads(n);
    applied = n;
  }
}

}  // namespace troupe
