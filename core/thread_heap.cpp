#include "core/thread_heap.hpp"

#include <dlfcn.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "core/huge_pages.hpp"

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
  // The 2 MiB range the blocks start in, if they start inside it (the heap's first range, which
  // holds the heap's own header): 0 if none or not asked for huge pages.
  std::uintptr_t head = 0;
  if (huge && !blocks.empty()) {
    // The blocks lie one after the other at the heap's top: the 2 MiB ranges they span.
    std::uintptr_t lo = UINTPTR_MAX, hi = 0;
    for (void* block : blocks) {
      lo = std::min(lo, reinterpret_cast<std::uintptr_t>(block));
      hi = std::max(hi, reinterpret_cast<std::uintptr_t>(block) + kBlock);
    }
    const std::uintptr_t first = lo & ~(huge_pages::kSize - 1);
    hi &= ~(huge_pages::kSize - 1);
    if (first + huge_pages::kSize <= hi && first != lo) head = first;
    lo = head ? first : (lo + huge_pages::kSize - 1) & ~(huge_pages::kSize - 1);
    // Advice only: a kernel without transparent huge pages refuses it, and nothing changes.
    if (hi > lo) madvise(reinterpret_cast<void*>(lo), hi - lo, MADV_HUGEPAGE);
  }
  for (void* block : blocks) std::free(block);
  // The blocks' headers were written before the advice, in small pages; giving the blocks back
  // (the heap's trim) empties the ranges past the head again, and their first write takes a huge
  // page. The head range keeps its live small pages (the heap's own header, what the thread had
  // allocated before), so each 4 KiB of the thread's next 2 MiB of allocations would cost a
  // fault of its own (512, where they cost microseconds each in a virtual machine). Collapsed
  // now (those few pages copied into one huge page) they cost none. A kernel without
  // MADV_COLLAPSE refuses it, and the range stays as it was.
  if (head) huge_pages::collapse_now(head);
}

}  // namespace troupe::thread_heap
