#pragma once
// Huge pages for a large graph's node state. A graph of thousands of nodes spreads its actors,
// plans, kernels and edges over tens of MiB of heap; a step visits them in the order of the
// graph's edges, not of their addresses, so with 4 KiB pages nearly every node costs a TLB miss
// and a page walk (in a virtual machine a two-level one). Backed by 2 MiB pages the same memory
// takes a few dozen TLB entries (docs/performance.md, "The fast path").
//
// The ranges are collapsed by the kernel (madvise MADV_COLLAPSE, Linux 6.1 and later) on a
// thread of this module's, so building a graph does not wait for it: the memory is copied into
// huge pages while the first steps run (other threads touching a range being collapsed wait
// for it briefly). Where the kernel cannot (an older kernel, THP disabled) it does nothing.
// TROUPE_HUGE_PAGES=0 in the environment turns it off.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace troupe::huge_pages {

inline constexpr std::uintptr_t kSize = std::uintptr_t(2) << 20;

// Queues the 2 MiB ranges that hold any of `addresses` for collapsing into huge pages, once
// each for the life of the process; returns at once. A range that is not anonymous private
// memory (a mapped file, a stack) is skipped by the kernel.
void collapse_around(const std::vector<const void*>& addresses);

// Whether collapsing is on: not turned off by TROUPE_HUGE_PAGES=0, and not found unsupported
// by the kernel.
bool enabled();

// Collapses the 2 MiB range at `start` (kSize-aligned) into a huge page now, on the calling
// thread (madvise MADV_COLLAPSE): 0, or the errno with which the kernel refused it.
int collapse_now(std::uintptr_t start);

// Waits until every range queued so far has been handled, at most `timeout`; true if all have.
bool settle(std::chrono::milliseconds timeout);

// What the collapsing thread has done since the process started: ranges collapsed, ranges the
// kernel refused (not anonymous memory, unmapped since, no huge page to be had).
struct Counts {
  std::size_t collapsed = 0;
  std::size_t refused = 0;
};
Counts counts();

}  // namespace troupe::huge_pages
