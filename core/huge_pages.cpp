#include "core/huge_pages.hpp"

#include <pthread.h>
#include <sys/mman.h>

#include <array>
#include <cerrno>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_set>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1; older headers lack it
#endif

namespace troupe::huge_pages {
namespace {

struct State {
  std::mutex mutex;
  std::condition_variable work, idle;
  std::deque<std::uintptr_t> queue;     // range starts, kSize-aligned
  std::unordered_set<std::uintptr_t> seen;  // queued at some time: never again
  bool busy = false;                    // the thread is collapsing a range now
  bool started = false;
  bool unsupported = false;  // the kernel does not know MADV_COLLAPSE (EINVAL on a good range)
  Counts counts;
};

bool turned_off() {
  static const bool off = [] {
    const char* v = std::getenv("TROUPE_HUGE_PAGES");
    return v && std::strcmp(v, "0") == 0;
  }();
  return off;
}

// Never destroyed: the thread is detached and may still be in madvise when the process exits.
State& state() {
  static State* s = new State;
  return *s;
}

void run(State& s) {
  pthread_setname_np(pthread_self(), "troupe.hugepage");
  std::unique_lock<std::mutex> lock(s.mutex);
  for (;;) {
    s.work.wait(lock, [&] { return !s.queue.empty(); });
    const std::uintptr_t start = s.queue.front();
    s.queue.pop_front();
    s.busy = true;
    lock.unlock();
    const int err = collapse_now(start);
    lock.lock();
    s.busy = false;
    if (err == 0) ++s.counts.collapsed;
    else ++s.counts.refused;
    // EINVAL on an anonymous heap range: the kernel has no MADV_COLLAPSE (or THP is off).
    if (err == EINVAL && s.counts.collapsed == 0 && s.counts.refused >= 4) {
      s.unsupported = true;
      s.queue.clear();
    }
    if (s.queue.empty()) s.idle.notify_all();
  }
}

}  // namespace

int collapse_now(std::uintptr_t start) {
  return madvise(reinterpret_cast<void*>(start), kSize, MADV_COLLAPSE) == 0 ? 0 : errno;
}

bool enabled() {
  if (turned_off()) return false;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return !s.unsupported;
}

void collapse_around(const std::vector<const void*>& addresses) {
  if (turned_off()) return;
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  if (s.unsupported) return;
  const std::size_t before = s.queue.size();
  // The addresses of a graph's nodes lie in a few dozen ranges: each is looked up in `seen` once
  // per call, not once per address (tens of thousands of them, while the first step returns).
  std::array<std::uintptr_t, 64> looked{};  // by range number, direct-mapped
  for (const void* a : addresses) {
    if (!a) continue;
    const std::uintptr_t start = reinterpret_cast<std::uintptr_t>(a) & ~(kSize - 1);
    std::uintptr_t& recent = looked[(start / kSize) % looked.size()];
    if (recent == start) continue;
    recent = start;
    if (s.seen.insert(start).second) s.queue.push_back(start);
  }
  if (s.queue.size() == before) return;
  if (!s.started) {
    s.started = true;
    std::thread([&s] { run(s); }).detach();
  }
  s.work.notify_one();
}

bool settle(std::chrono::milliseconds timeout) {
  State& s = state();
  std::unique_lock<std::mutex> lock(s.mutex);
  return s.idle.wait_for(lock, timeout, [&] { return s.queue.empty() && !s.busy; });
}

Counts counts() {
  State& s = state();
  std::lock_guard<std::mutex> lock(s.mutex);
  return s.counts;
}

}  // namespace troupe::huge_pages
