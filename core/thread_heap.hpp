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
// Asked to, it also advises the kernel to back that room with transparent huge pages
// (madvise MADV_HUGEPAGE): each 2 MiB of it then comes in one page fault instead of 512, and
// lies in a huge page from the start (what core/huge_pages.hpp otherwise collapses later); the
// 2 MiB range the room starts in, which already holds small pages (a new heap's header), is
// collapsed into a huge page at once (MADV_COLLAPSE).
#include <cstddef>

namespace troupe::thread_heap {

// At most this much is made ahead in one call (a heap is 64 MiB at most; past it glibc starts
// another, which giving the blocks back would free again).
inline constexpr std::size_t kMaxReserve = std::size_t(48) << 20;

// Whether malloc is glibc's (not a sanitizer's, nor another allocator preloaded): elsewhere
// reserve() does nothing.
bool glibc_malloc();

// Makes the calling thread's heap accessible for about `bytes` (at most kMaxReserve) more, the
// 2 MiB ranges of it in huge pages if `huge`; does nothing for less than 96 KiB,
// nor on the process's first thread (glibc's main heap grows by brk with room to spare, and
// giving the room back would unmap the advised range).
void reserve(std::size_t bytes, bool huge);

}  // namespace troupe::thread_heap
