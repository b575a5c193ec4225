// Huge pages for a graph's node state (core/huge_pages.hpp): the ranges around the addresses
// given end up backed by 2 MiB pages, as /proc/self/smaps tells, where the kernel can.
#include <boost/test/unit_test.hpp>

#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <cstring>
#include <string>

#include "core/huge_pages.hpp"
#include "test/support/skip.hpp"
#include "test/support/smaps.hpp"

using namespace troupe;

namespace {

// 8 MiB of anonymous memory, 2 MiB aligned, every page touched: in 4 KiB pages, as a heap's are
// (unless transparent huge pages are 'always'), and left alone by khugepaged (not advised).
struct Touched {
  static constexpr std::size_t kBytes = 8 * huge_pages::kSize / 2;
  void* raw = mmap(nullptr, kBytes + huge_pages::kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  char* base = raw == MAP_FAILED ? nullptr
                                 : reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(raw) + huge_pages::kSize - 1) &
                                                           ~(huge_pages::kSize - 1));
  Touched() {
    if (base) std::memset(base, 7, kBytes);
  }
  ~Touched() {
    if (raw != MAP_FAILED) munmap(raw, kBytes + huge_pages::kSize);
  }
};

// Why no range can be seen collapsing here ("" when one can): huge pages off, memory that comes
// in huge pages anyway (transparent huge pages 'always'), or a kernel that collapses nothing (a
// probe range of its own is tried).
std::string why_no_collapse_is_seen() {
  if (!huge_pages::enabled()) return "huge pages are off here (TROUPE_HUGE_PAGES=0 or a kernel without MADV_COLLAPSE)";
  Touched probe;
  if (!probe.base) return "cannot map 10 MiB";
  if (testing::smaps_kib(probe.base, "AnonHugePages") != 0)
    return "the memory came in huge pages already (transparent huge pages 'always'): nothing to tell apart";
  const auto before = huge_pages::counts();
  huge_pages::collapse_around({probe.base + 10});
  if (!huge_pages::settle(std::chrono::seconds(30))) return "the probe's collapse did not settle within 30 s";
  if (huge_pages::counts().collapsed == before.collapsed)
    return "this kernel collapses no range into huge pages (MADV_COLLAPSE needs Linux 6.1 and transparent huge "
           "pages not 'never')";
  return "";
}

}  // namespace

BOOST_AUTO_TEST_CASE(the_ranges_around_the_addresses_given_end_up_in_huge_pages,
                     *troupe::testing::runs_here(why_no_collapse_is_seen)) {
  Touched memory;
  BOOST_TEST_REQUIRE(memory.base != nullptr);
  char* base = memory.base;
  BOOST_TEST_REQUIRE(testing::smaps_kib(base, "AnonHugePages") == 0);

  const auto before = huge_pages::counts();
  // Two addresses in the second 2 MiB range, one in the fourth: two ranges collapsed.
  huge_pages::collapse_around({base + huge_pages::kSize + 10, base + huge_pages::kSize + 5000,
                               base + 3 * huge_pages::kSize + 1});
  BOOST_TEST_REQUIRE(huge_pages::settle(std::chrono::seconds(30)));
  const auto after = huge_pages::counts();
  BOOST_TEST(after.collapsed - before.collapsed == 2u);
  BOOST_TEST(after.refused == before.refused);
  BOOST_TEST(testing::smaps_kib(base, "AnonHugePages") == long(2 * huge_pages::kSize / 1024));
  // The bytes are what they were.
  bool same = true;
  for (std::size_t i = 0; i < Touched::kBytes; i += 4093) same = same && base[i] == 7;
  BOOST_TEST(same);
  // Asked again, a range is not collapsed again.
  huge_pages::collapse_around({base + huge_pages::kSize});
  BOOST_TEST_REQUIRE(huge_pages::settle(std::chrono::seconds(30)));
  BOOST_TEST(huge_pages::counts().collapsed + huge_pages::counts().refused ==
             after.collapsed + after.refused);
}
