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

namespace {
std::size_t rounded_size(std::size_t bytes) {
  if (bytes >= HostAllocator::kLargeBlock) return (bytes + 4095) & ~std::size_t(4095);
  return bytes ? (bytes + 63) & ~std::size_t(63) : 64;
}
}  // namespace

HostAllocator::~HostAllocator() { release_cached(); }

void* HostAllocator::allocate(std::size_t bytes) {
  const std::size_t rounded = rounded_size(bytes);
  void* p = nullptr;
  if (rounded >= kLargeBlock) {
    std::lock_guard lock(mutex_);
    auto it = free_.find(rounded);
    if (it != free_.end() && !it->second.empty()) {
      p = it->second.back();
      it->second.pop_back();
      cached_ -= rounded;
    }
  }
  if (!p) p = std::aligned_alloc(64, rounded);
  if (!p)
    fail(ErrorCode::resource_exhausted, "out of host memory allocating {} bytes on {}", bytes,
         device_name_);
  count_allocation(bytes);
  return p;
}

void HostAllocator::deallocate(void* ptr, std::size_t bytes) {
  count_deallocation(bytes);
  const std::size_t rounded = rounded_size(bytes);
  if (rounded >= kLargeBlock) {
    std::lock_guard lock(mutex_);
    if (cached_ + rounded <= cache_limit_) {
      free_[rounded].push_back(ptr);
      cached_ += rounded;
      return;
    }
  }
  std::free(ptr);
}

std::size_t HostAllocator::bytes_cached() const {
  std::lock_guard lock(mutex_);
  return cached_;
}

void HostAllocator::release_cached() {
  std::lock_guard lock(mutex_);
  for (auto& [size, blocks] : free_)
    for (void* p : blocks) std::free(p);
  free_.clear();
  cached_ = 0;
}

Allocator& host_allocator() {
  static HostAllocator* allocator = new HostAllocator("/job:localhost/task:0/device:CPU:0");
  return *allocator;
}

}  // namespace troupe
