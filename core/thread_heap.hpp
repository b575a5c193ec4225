#pragma once
// Room in a thread's malloc heap, made ahead. glibc gives every thread but the process's first
// a heap of its own (an arena, reserved as 64 MiB of inaccessible address space) and makes it
// accessible as it grows, one mprotect call for each page or so past its highest mark: a thread
// that allocates tens of MiB in small pieces (a large graph's node actors, spawned by several
// threads: actors/executor/executable.cpp) makes thousands of such calls, each a change to the
// process's memory map. reserve() moves that mark ahead in a few calls: it allocates the bytes
// in blocks below malloc's mmap threshold and gives them back at once; the heap keeps them
// accessible (untouched, so no memory is used) and the thread's next allocations up to there
// need no call. With another allocator it does nothing; in strict overcommit mode, where glibc
// makes a shrunk heap inaccessible again, it costs a few allocations and gains nothing.
//
// The room stays in small pages (a large graph's node state goes into huge pages later, by
// core/huge_pages.hpp's background collapse). It was once advised for transparent huge pages,
// which made a set-up's faults fewer; but a huge page is a free 2 MiB block, and a virtual
// machine that reports its free memory to the host (virtio-balloon free page reporting) has
// given such blocks back: the host then backs each again 4 KiB at a time, and a 10,000-node
// graph's spawn took 30-70 ms in some runs instead of 5-6 (docs/performance.md).
#include <cstddef>

namespace troupe::thread_heap {

// At most this much is made ahead in one call (a heap is 64 MiB at most; past it glibc starts
// another, which giving the blocks back would free again).
inline constexpr std::size_t kMaxReserve = std::size_t(48) << 20;

// Whether malloc is glibc's (not a sanitizer's, nor another allocator preloaded): elsewhere
// reserve() does nothing.
bool glibc_malloc();

// Makes the calling thread's heap accessible for about `bytes` (at most kMaxReserve) more; does
// nothing for less than 96 KiB, nor on the process's first thread (glibc's main heap grows by
// brk with room to spare).
void reserve(std::size_t bytes);

}  // namespace troupe::thread_heap
