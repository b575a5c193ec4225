#include "core/allocator.hpp"

#include <cstdlib>
#include <new>

#include "core/error.hpp"

namespace troupe {

void Allocator::count_allocation(std::size_t bytes) {
  auto now = in_use_.fetch_add(bytes, std::memory_order_relaxed) + bytes;
  auto peak = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
}

void* HostAllocator::allocate(std::size_t bytes) {
  std::size_t rounded = (bytes + 63) & ~std::size_t(63);
  void* p = std::aligned_alloc(64, rounded ? rounded : 64);
  if (!p)
    fail(ErrorCode::resource_exhausted, "out of host memory allocating {} bytes on {}", bytes,
         device_name_);
  count_allocation(bytes);
  return p;
}

void HostAllocator::deallocate(void* ptr, std::size_t bytes) {
  std::free(ptr);
  count_deallocation(bytes);
}

Allocator& host_allocator() {
  static HostAllocator* allocator = new HostAllocator("/job:localhost/task:0/device:CPU:0");
  return *allocator;
}

}  // namespace troupe
