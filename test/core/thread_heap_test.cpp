// Room in a thread's malloc heap made ahead (core/thread_heap.hpp): after reserve(), the heap
// that a thread's small allocations come from is accessible for at least what was asked, as
// /proc/self/maps tells, and what the thread then allocates there comes in small pages, as
// /proc/self/smaps tells.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_heap.hpp"
#include "test/support/smaps.hpp"

using namespace troupe;

namespace {

// The kernel's transparent huge page mode: "always", "madvise" or "never" ("" if unknown).
std::string transparent_huge_pages() {
  std::ifstream in("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string all;
  std::getline(in, all);
  const auto open = all.find('['), close = all.find(']');
  return open == std::string::npos || close == std::string::npos ? "" : all.substr(open + 1, close - open - 1);
}

// The size of the mapping of this process that holds `address`, if it is readable and
// writable; 0 otherwise.
std::size_t writable_bytes_around(const void* address) {
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream maps("/proc/self/maps");
  for (std::string line; std::getline(maps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::string perms;
    std::istringstream in(line);
    if (!(in >> std::hex >> lo >> dash >> hi >> perms) || dash != '-') continue;
    if (lo <= a && a < hi) return perms.rfind("rw", 0) == 0 ? hi - lo : 0;
  }
  return 0;
}

// On a thread of its own (a heap other than the main one): the writable bytes around a small
// allocation before and after reserve(extra).
std::pair<std::size_t, std::size_t> around_a_reserve(std::size_t extra) {
  std::pair<std::size_t, std::size_t> out;
  std::thread([&] {
    void* before = std::malloc(64);
    out.first = writable_bytes_around(before);
    thread_heap::reserve(out.first + extra);
    void* after = std::malloc(64);
    out.second = writable_bytes_around(after);
    std::free(after);
    std::free(before);
  }).join();
  return out;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_threads_heap_reserved_ahead_is_writable_for_what_was_asked) {
  if (!thread_heap::glibc_malloc()) {
    BOOST_TEST_MESSAGE("skipped: malloc is not glibc's here (a sanitizer's or a preloaded one)");
    return;
  }
  constexpr std::size_t extra = std::size_t(16) << 20;
  const auto [before, after] = around_a_reserve(extra);
  BOOST_TEST_REQUIRE(before > 0u);  // a small allocation lies in writable memory
  if (before + extra > thread_heap::kMaxReserve) {
    BOOST_TEST_MESSAGE("skipped: this thread's heap was grown past " << before << " bytes already");
    return;
  }
  std::ifstream overcommit("/proc/sys/vm/overcommit_memory");
  int mode = 0;
  if (overcommit >> mode && mode == 2) {
    BOOST_TEST_MESSAGE("skipped: strict overcommit (mode 2), where glibc makes a shrunk heap inaccessible again");
    return;
  }
  // Without the reserve the heap would stay about as it was: a few pages past `before`.
  BOOST_TEST(after >= before + extra);
  BOOST_TEST(after < before + extra + thread_heap::kMaxReserve);
}

BOOST_AUTO_TEST_CASE(a_threads_reserved_room_comes_in_small_pages_not_in_huge_ones_at_its_first_write) {
  if (!thread_heap::glibc_malloc()) {
    BOOST_TEST_MESSAGE("skipped: malloc is not glibc's here (a sanitizer's or a preloaded one)");
    return;
  }
  if (const std::string mode = transparent_huge_pages(); mode != "madvise") {
    // With "always" the kernel gives huge pages whatever is advised; with "never" it gives none.
    BOOST_TEST_MESSAGE("skipped: transparent huge pages are '" << mode << "' here, not 'madvise'");
    return;
  }
  // 8 MiB written in 2 KiB pieces after room for 12 MiB: advised for huge pages (as the room once
  // was), their whole 2 MiB ranges (3 at least) would come in huge pages at their first write.
  // What the heap's mapping had in huge pages before (an exited thread's heap reused, collapsed
  // earlier) does not count.
  long before_kib = -1, after_kib = -1;
  std::thread([&] {
    thread_heap::reserve(std::size_t(12) << 20);
    void* first = std::malloc(2048);
    before_kib = testing::smaps_kib(first, "AnonHugePages");
    std::vector<char*> pieces;
    for (int i = 0; i < 4096; ++i) {
      pieces.push_back(static_cast<char*>(std::malloc(2048)));
      std::memset(pieces.back(), 1, 2048);
    }
    after_kib = testing::smaps_kib(pieces[2048], "AnonHugePages");
    for (char* p : pieces) std::free(p);
    std::free(first);
  }).join();
  BOOST_TEST_REQUIRE(before_kib >= 0);
  BOOST_TEST_REQUIRE(after_kib >= 0);
  BOOST_TEST(after_kib - before_kib < 2048);
}
