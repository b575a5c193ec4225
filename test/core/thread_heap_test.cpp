// Room in a thread's malloc heap made ahead (core/thread_heap.hpp): after reserve(), the heap
// that a thread's small allocations come from is accessible for at least what was asked, as
// /proc/self/maps tells, and, asked for huge pages, what the thread then allocates there comes
// in huge pages, as /proc/self/smaps and the thread's page faults tell.
#include <boost/test/unit_test.hpp>

#include <sys/resource.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/thread_heap.hpp"
#include "test/support/skip.hpp"
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
    thread_heap::reserve(out.first + extra, /*huge=*/false);
    void* after = std::malloc(64);
    out.second = writable_bytes_around(after);
    std::free(after);
    std::free(before);
  }).join();
  return out;
}

constexpr std::size_t kExtra = std::size_t(16) << 20;

// Why a reserve of kExtra cannot be seen here, "" if it can: another malloc, strict overcommit
// (glibc then makes a shrunk heap inaccessible again), or a new thread's heap already so large
// that kExtra more would pass what reserve() makes.
std::string why_no_reserve_is_seen() {
  if (!thread_heap::glibc_malloc()) return "malloc is not glibc's here (a sanitizer's or a preloaded one)";
  std::ifstream overcommit("/proc/sys/vm/overcommit_memory");
  int mode = 0;
  if (overcommit >> mode && mode == 2)
    return "strict overcommit (mode 2), where glibc makes a shrunk heap inaccessible again";
  std::size_t before = 0;
  std::thread([&] {
    void* p = std::malloc(64);
    before = writable_bytes_around(p);
    std::free(p);
  }).join();
  if (before + kExtra > thread_heap::kMaxReserve)
    return "a new thread's heap is " + std::to_string(before) + " bytes already";
  return "";
}

// Why a reserve in huge pages cannot be seen here, "" if it can.
std::string why_no_huge_reserve() {
  if (!thread_heap::glibc_malloc()) return "malloc is not glibc's here (a sanitizer's or a preloaded one)";
  const std::string mode = transparent_huge_pages();
  if (mode != "madvise" && mode != "always") return "transparent huge pages are '" + mode + "' here";
  return "";
}

// On a thread of its own: room for 12 MiB made in huge pages, then `count` pieces of 2 KiB
// allocated and each written; `look(pieces, faults)` sees them before they are freed, and the
// thread's page faults while writing them.
template <class Look>
void pieces_after_a_huge_reserve(int count, Look&& look) {
  std::thread([&] {
    thread_heap::reserve(std::size_t(12) << 20, /*huge=*/true);
    rusage before{};
    getrusage(RUSAGE_THREAD, &before);
    std::vector<char*> pieces;
    for (int i = 0; i < count; ++i) {
      pieces.push_back(static_cast<char*>(std::malloc(2048)));
      std::memset(pieces.back(), 1, 2048);
    }
    rusage after{};
    getrusage(RUSAGE_THREAD, &after);
    look(pieces, after.ru_minflt - before.ru_minflt);
    for (char* p : pieces) std::free(p);
  }).join();
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_threads_heap_reserved_ahead_is_writable_for_what_was_asked,
                     *troupe::testing::runs_here(why_no_reserve_is_seen)) {
  constexpr std::size_t extra = kExtra;
  const auto [before, after] = around_a_reserve(extra);
  BOOST_TEST_REQUIRE(before > 0u);  // a small allocation lies in writable memory
  BOOST_TEST_REQUIRE(before + extra <= thread_heap::kMaxReserve, "the thread's heap is " << before << " bytes already");
  // Without the reserve the heap would stay about as it was: a few pages past `before`.
  BOOST_TEST(after >= before + extra);
  BOOST_TEST(after < before + extra + thread_heap::kMaxReserve);
}

BOOST_AUTO_TEST_CASE(a_threads_heap_reserved_in_huge_pages_gives_its_small_allocations_huge_pages,
                     *troupe::testing::runs_here(why_no_huge_reserve)) {
  // 8 MiB in 2 KiB pieces.
  long huge_kib = -1;
  pieces_after_a_huge_reserve(4096, [&](const std::vector<char*>& pieces, long) {
    huge_kib = testing::smaps_kib(pieces[2048], "AnonHugePages");
  });
  // (With 'always' the heap may have had them anyway; with 'madvise', as on this project's
  // machines, only the advice gives them.) At least the whole 2 MiB ranges inside the 8 MiB
  // written (3 of them) are huge pages.
  BOOST_TEST(huge_kib >= 3 * 2048);
}

BOOST_AUTO_TEST_CASE(the_first_two_mib_after_a_reserve_in_huge_pages_take_a_few_faults_not_one_a_page,
                     *troupe::testing::runs_here(why_no_huge_reserve)) {
  // The room starts inside a 2 MiB range that already holds small pages (a new heap's header,
  // or what the thread had allocated): 2 MiB of small allocations written there fault once a
  // huge page, not once a 4 KiB page (about 500).
  long faults = -1;
  pieces_after_a_huge_reserve(1024, [&](const std::vector<char*>&, long written) { faults = written; });
  BOOST_TEST(faults >= 0);
  BOOST_TEST(faults < 64);
}
