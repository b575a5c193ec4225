#include "core/thread_heap.hpp"

#include <dlfcn.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
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

void reserve(std::size_t bytes) {
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
  for (void* block : blocks) std::free(block);
}

}  // namespace troupe::thread_heap
