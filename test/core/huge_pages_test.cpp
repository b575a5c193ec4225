// Huge pages for a graph's node state (core/huge_pages.hpp): the ranges around the addresses
// given end up backed by 2 MiB pages, as /proc/self/smaps tells, where the kernel can.
#include <boost/test/unit_test.hpp>

#include <sys/mman.h>

#include <chrono>
#include <cstdint>
#include <cstring>

#include "core/huge_pages.hpp"
#include "test/support/smaps.hpp"

using namespace troupe;

BOOST_AUTO_TEST_CASE(the_ranges_around_the_addresses_given_end_up_in_huge_pages) {
  // 8 MiB of anonymous memory, every page touched: in 4 KiB pages, as a heap's are (unless
  // transparent huge pages are 'always'), and left alone by khugepaged (not advised).
  const std::size_t bytes = 8 * huge_pages::kSize / 2;
  void* raw = mmap(nullptr, bytes + huge_pages::kSize, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  BOOST_TEST_REQUIRE(raw != MAP_FAILED);
  auto* base = reinterpret_cast<char*>((reinterpret_cast<std::uintptr_t>(raw) + huge_pages::kSize - 1) &
                                       ~(huge_pages::kSize - 1));
  std::memset(base, 7, bytes);
  if (testing::smaps_kib(base, "AnonHugePages") != 0) {  // transparent huge pages 'always': nothing to tell apart
    BOOST_TEST_MESSAGE("skipped: the memory came in huge pages already");
    munmap(raw, bytes + huge_pages::kSize);
    return;
  }

  const auto before = huge_pages::counts();
  // Two addresses in the second 2 MiB range, one in the fourth: two ranges collapsed.
  huge_pages::collapse_around({base + huge_pages::kSize + 10, base + huge_pages::kSize + 5000,
                               base + 3 * huge_pages::kSize + 1});
  BOOST_TEST_REQUIRE(huge_pages::settle(std::chrono::seconds(30)));
  const auto after = huge_pages::counts();
  if (!huge_pages::enabled() || after.collapsed == before.collapsed) {
    BOOST_TEST_MESSAGE("skipped: this kernel collapses no range into huge pages (MADV_COLLAPSE needs Linux 6.1 "
                       "and transparent huge pages not 'never'); refused "
                       << after.refused - before.refused);
    munmap(raw, bytes + huge_pages::kSize);
    return;
  }
  BOOST_TEST(after.collapsed - before.collapsed == 2u);
  BOOST_TEST(after.refused == before.refused);
  BOOST_TEST(testing::smaps_kib(base, "AnonHugePages") == long(2 * huge_pages::kSize / 1024));
  // The bytes are what they were.
  bool same = true;
  for (std::size_t i = 0; i < bytes; i += 4093) same = same && base[i] == 7;
  BOOST_TEST(same);
  // Asked again, a range is not collapsed again.
  huge_pages::collapse_around({base + huge_pages::kSize});
  BOOST_TEST_REQUIRE(huge_pages::settle(std::chrono::seconds(30)));
  BOOST_TEST(huge_pages::counts().collapsed + huge_pages::counts().refused ==
             after.collapsed + after.refused);
  munmap(raw, bytes + huge_pages::kSize);
}
