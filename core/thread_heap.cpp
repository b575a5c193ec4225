#include "core/thread_heap.hpp"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

namespace troupe::thread_heap {

bool glibc_malloc() {
  static const bool glibc = [] {
    void* libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    const bool same = libc && dlsym(libc, "malloc") == dlsym(RTLD_DEFAULT, "malloc");
    if (libc) dlclose(libc);
    return same;
  }();
  return glibc;
}

void reserve(std::size_t bytes, bool huge) {
  // Below the default mmap threshold (128 KiB), which only ever rises: each block comes from
  // the heap. Given back in the order taken, each merges with the one before it, and the last
  // with the heap's top: one trim for them all. Less than a block (a small graph's actors) is
  // not worth the calls.
  constexpr std::size_t kBlock = std::size_t(96) << 10;
  if (bytes < kBlock || syscall(SYS_gettid) == getpid() || !glibc_malloc()) return;
  const std::size_t want = std::min(bytes, kMaxReserve);
  std::vector<void*> blocks;
  blocks.reserve(want / kBlock + 1);
  for (std::size_t got = 0; got < want; got += kBlock) {
    void* block = std::malloc(kBlock);
    if (!block) break;
    blocks.push_back(block);
  }
  if (huge && !blocks.empty()) {
    // The blocks lie one after the other at the heap's top: the whole 2 MiB ranges they span.
    constexpr std::uintptr_t kHuge = std::uintptr_t(2) << 20;
    std::uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (void* block : blocks) {
      lo = std::min(lo, reinterpret_cast<std::uintptr_t>(block));
      hi = std::max(hi, reinterpret_cast<std::uintptr_t>(block) + kBlock);
    }
    lo = (lo + kHuge - 1) & ~(kHuge - 1);
    hi &= ~(kHuge - 1);
    // Advice only: a kernel without transparent huge pages refuses it, and nothing changes.
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
  }
  for (void* block : blocks) std::free(block);
}

}  // namespace troupe::thread_heap
