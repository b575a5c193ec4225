// The host allocator: alignment, counting, and the cache of large blocks.
#include <boost/test/unit_test.hpp>

#include <cstdint>

#include "core/allocator.hpp"

using namespace troupe;

BOOST_AUTO_TEST_CASE(a_freed_large_block_is_handed_out_again_for_the_same_size) {
  HostAllocator a("/job:localhost/task:0/device:CPU:0");
  const std::size_t big = 3 * HostAllocator::kLargeBlock + 100;
  void* p = a.allocate(big);
  BOOST_TEST(reinterpret_cast<std::uintptr_t>(p) % 64 == 0u);
  BOOST_TEST(a.bytes_in_use() == big);
  a.deallocate(p, big);
  BOOST_TEST(a.bytes_in_use() == 0u);
  BOOST_TEST(a.bytes_cached() >= big);
  void* q = a.allocate(big - 50);  // rounds to the same 4 KiB size
  BOOST_TEST(q == p);
  BOOST_TEST(a.bytes_cached() == 0u);
  BOOST_TEST(a.peak_bytes() == big);
  a.deallocate(q, big - 50);
}

BOOST_AUTO_TEST_CASE(small_blocks_are_not_cached_and_the_cache_stays_under_its_limit) {
  HostAllocator a("/job:localhost/task:0/device:CPU:0", 2 * HostAllocator::kLargeBlock);
  void* small = a.allocate(100);
  a.deallocate(small, 100);
  BOOST_TEST(a.bytes_cached() == 0u);
  void* b1 = a.allocate(HostAllocator::kLargeBlock);
  void* b2 = a.allocate(HostAllocator::kLargeBlock);
  void* b3 = a.allocate(HostAllocator::kLargeBlock);
  a.deallocate(b1, HostAllocator::kLargeBlock);
  a.deallocate(b2, HostAllocator::kLargeBlock);
  a.deallocate(b3, HostAllocator::kLargeBlock);  // over the limit: returned to the system
  BOOST_TEST(a.bytes_cached() == 2 * HostAllocator::kLargeBlock);
  a.release_cached();
  BOOST_TEST(a.bytes_cached() == 0u);
}
