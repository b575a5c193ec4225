// The host allocator: alignment, counting, and the cache of large blocks.
#include <boost/test/unit_test.hpp>

#include <cstdint>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "core/allocator.hpp"
#include "core/error.hpp"

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

BOOST_AUTO_TEST_CASE(a_freed_large_block_goes_back_first_to_the_thread_that_freed_it) {
  HostAllocator a("/job:localhost/task:0/device:CPU:0");
  const std::size_t big = HostAllocator::kLargeBlock;
  void* mine = a.allocate(big);
  void* theirs = a.allocate(big);
  a.deallocate(mine, big);
  std::thread([&] { a.deallocate(theirs, big); }).join();  // freed last, by another thread
  BOOST_TEST(a.bytes_cached() == 2 * big);
  void* first = a.allocate(big);
  BOOST_TEST(first == mine, "this thread's own block, warm in its core's cache, though the other was freed later");
  void* second = a.allocate(big);
  BOOST_TEST(second == theirs, "then the other thread's");
  BOOST_TEST(a.bytes_cached() == 0u);
  a.deallocate(first, big);
  a.deallocate(second, big);
}

BOOST_AUTO_TEST_CASE(a_kernel_thread_keeps_its_last_freed_blocks_aside_and_passes_older_ones_on) {
  HostAllocator a("/job:localhost/task:0/device:CPU:0");
  const std::size_t big = HostAllocator::kLargeBlock;
  const int n = HostAllocator::kThreadBlocks;
  std::vector<void*> blocks(std::size_t(n) + 1);
  void* again = nullptr;
  void* huge = nullptr;
  std::thread([&] {
    HostAllocator::keep_blocks_on_this_thread();
    for (auto& b : blocks) b = a.allocate(big);
    for (auto& b : blocks) a.deallocate(b, big);
    // The oldest went on to the allocator's cache when the last needed its place.
    BOOST_TEST(a.bytes_cached() == big);
    BOOST_TEST(a.bytes_in_use() == 0u);
    again = a.allocate(big);  // from this thread's own, without the cache
    BOOST_TEST(a.bytes_cached() == big);
    BOOST_TEST(again != blocks[0]);
    a.deallocate(again, big);
    // A block above kThreadBlockBytes goes to the cache as before.
    huge = a.allocate(HostAllocator::kThreadBlockBytes + 4096);
    a.deallocate(huge, HostAllocator::kThreadBlockBytes + 4096);
    BOOST_TEST(a.bytes_cached() == big + HostAllocator::kThreadBlockBytes + 4096);
  }).join();  // the blocks it kept aside are freed with it
  // Another thread (this one keeps none aside) finds only what went to the cache.
  void* first = a.allocate(big);
  BOOST_TEST(first == blocks[0]);
  BOOST_TEST(a.bytes_cached() == HostAllocator::kThreadBlockBytes + 4096);
  a.deallocate(first, big);
}

BOOST_AUTO_TEST_CASE(blocks_freed_by_other_threads_are_counted_and_one_threads_peak_is_exact) {
  HostAllocator a("/job:localhost/task:0/device:CPU:0");
  // Well past a thread's flush, in small blocks and large, so that the counts cross it.
  std::vector<std::size_t> sizes;
  std::size_t total = 0;
  for (int i = 0; total < 3 * std::size_t(Allocator::kFlushBytes); ++i) {
    sizes.push_back(i % 4 == 3 ? 3 * HostAllocator::kLargeBlock + 8 : std::size_t(100 + 37 * i));
    total += sizes.back();
  }
  std::vector<void*> blocks(sizes.size());
  std::thread([&] {
    for (std::size_t i = 0; i < sizes.size(); ++i) blocks[i] = a.allocate(sizes[i]);
  }).join();
  BOOST_TEST(a.bytes_in_use() == total);
  BOOST_TEST(a.peak_bytes() == total, "one thread allocated: its peak is exact");
  // Freed by four threads at once, none of which allocated them.
  std::vector<std::thread> freeing;
  for (std::size_t t = 0; t < 4; ++t)
    freeing.emplace_back([&, t] {
      for (std::size_t i = t; i < sizes.size(); i += 4) a.deallocate(blocks[i], sizes[i]);
    });
  for (auto& t : freeing) t.join();
  BOOST_TEST(a.bytes_in_use() == 0u);
  BOOST_TEST(a.peak_bytes() == total);
  void* p = a.allocate(100);
  BOOST_TEST(a.bytes_in_use() == 100u);
  a.reset_peak();
  BOOST_TEST(a.peak_bytes() == 100u);
  a.deallocate(p, 100);
  BOOST_TEST(a.peak_bytes() == 100u);
  BOOST_TEST(a.bytes_in_use() == 0u);
}

namespace {

// Host memory with a budget: the backend a GPU's allocator has, with its limit made small.
struct BudgetBackend {
  std::size_t budget;
  std::size_t used = 0;
  std::map<void*, std::size_t> blocks;
  CachingAllocator::Backend backend() {
    return {[this](std::size_t bytes, std::string* why) -> void* {
              if (used + bytes > budget) {
                *why = "over the budget of " + std::to_string(budget) + " bytes";
                return nullptr;
              }
              void* p = std::aligned_alloc(256, bytes);
              used += bytes;
              blocks[p] = bytes;
              return p;
            },
            [this](void* p) {
              used -= blocks.at(p);
              blocks.erase(p);
              std::free(p);
            }};
  }
};

}  // namespace

BOOST_AUTO_TEST_CASE(size_classes_round_up_by_at_most_a_quarter) {
  BOOST_TEST(CachingAllocator::size_class(0) == 512u);
  BOOST_TEST(CachingAllocator::size_class(513) == 1024u);
  BOOST_TEST(CachingAllocator::size_class(std::size_t(1) << 20) == std::size_t(1) << 20);
  BOOST_TEST(CachingAllocator::size_class((std::size_t(1) << 20) + 1) == std::size_t(1280) << 10);
  for (std::size_t bytes : {std::size_t(3) << 20, std::size_t(77) << 20, (std::size_t(5) << 30) + 7}) {
    std::size_t c = CachingAllocator::size_class(bytes);
    BOOST_TEST(c >= bytes);
    BOOST_TEST(c - bytes <= bytes / 4);
  }
}

BOOST_AUTO_TEST_CASE(a_repeated_step_makes_no_raw_allocation_after_the_first) {
  std::size_t budget = std::size_t(64) << 20;
  BudgetBackend raw{budget};
  CachingAllocator a("/job:localhost/task:0/device:GPU:0", false, raw.backend());
  const std::vector<std::size_t> step = {100, 4096, std::size_t(3) << 20, 100, std::size_t(5) << 20};
  auto run_step = [&] {
    std::vector<void*> blocks;
    for (std::size_t b : step) blocks.push_back(a.allocate(b));
    for (std::size_t i = 0; i < step.size(); ++i) a.deallocate(blocks[i], step[i]);
  };
  run_step();
  const int64_t after_first = a.raw_allocations();
  BOOST_TEST(after_first == int64_t(step.size()));
  for (int i = 0; i < 5; ++i) run_step();
  BOOST_TEST(a.raw_allocations() == after_first);
  BOOST_TEST(a.bytes_in_use() == 0u);
  BOOST_TEST(a.peak_bytes() == 100u + 4096u + (std::size_t(3) << 20) + 100u + (std::size_t(5) << 20));
  BOOST_TEST(a.bytes_cached() == a.bytes_reserved());
}

BOOST_AUTO_TEST_CASE(out_of_memory_releases_the_cache_and_retries_then_names_the_device) {
  BudgetBackend raw{std::size_t(4) << 20};
  CachingAllocator a("/job:localhost/task:0/device:GPU:0", false, raw.backend());
  void* p = a.allocate(std::size_t(3) << 20);
  a.deallocate(p, std::size_t(3) << 20);  // cached: the budget is spent
  // Another size class does not fit beside the cached block; the cache is released for it.
  void* q = a.allocate(std::size_t(2) << 20);
  BOOST_TEST(a.bytes_cached() == 0u);
  BOOST_TEST(a.bytes_reserved() == std::size_t(2) << 20);
  try {
    a.allocate(std::size_t(3) << 20);
    BOOST_FAIL("an allocation past the budget succeeded");
  } catch (const Error& e) {
    BOOST_TEST(e.code() == ErrorCode::resource_exhausted);
    BOOST_TEST(std::string(e.what()).find("device:GPU:0") != std::string::npos);
    BOOST_TEST(std::string(e.what()).find("over the budget") != std::string::npos);
  }
  a.deallocate(q, std::size_t(2) << 20);
}
