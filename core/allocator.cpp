#include "core/allocator.hpp"

#include <algorithm>
#include <cstdlib>
#include <new>
#include <utility>

#include "core/error.hpp"

namespace troupe {

namespace {
// This thread's stripe of every allocator's count: threads take the stripes in turn.
int stripe_of_this_thread() {
  static std::atomic<unsigned> next{0};
  thread_local const int stripe [[gnu::tls_model("initial-exec")]] =
      int(next.fetch_add(1, std::memory_order_relaxed) % Allocator::kStripes);
  return stripe;
}
// Moves what `stripe` holds into `total`; the new total.
int64_t flush(std::atomic<int64_t>& stripe, std::atomic<int64_t>& total) {
  const int64_t moved = stripe.exchange(0, std::memory_order_relaxed);
  return total.fetch_add(moved, std::memory_order_relaxed) + moved;
}
}  // namespace

void Allocator::count_allocation(std::size_t bytes) {
  auto& stripe = stripes_[stripe_of_this_thread()].bytes;
  int64_t mine = stripe.fetch_add(int64_t(bytes), std::memory_order_relaxed) + int64_t(bytes);
  const int64_t total = mine >= kFlushBytes ? flush(stripe, flushed_) : flushed_.load(std::memory_order_relaxed) + mine;
  if (total <= 0) return;
  auto peak = peak_.load(std::memory_order_relaxed);
  while (std::size_t(total) > peak && !peak_.compare_exchange_weak(peak, std::size_t(total), std::memory_order_relaxed)) {
  }
}

void Allocator::count_deallocation(std::size_t bytes) {
  auto& stripe = stripes_[stripe_of_this_thread()].bytes;
  if (stripe.fetch_sub(int64_t(bytes), std::memory_order_relaxed) - int64_t(bytes) <= -kFlushBytes)
    flush(stripe, flushed_);
}

std::size_t Allocator::bytes_in_use() const {
  int64_t total = flushed_.load(std::memory_order_relaxed);
  for (const auto& s : stripes_) total += s.bytes.load(std::memory_order_relaxed);
  return total > 0 ? std::size_t(total) : 0;  // below 0 only for a moment, while a flush moves
}

std::size_t Allocator::peak_bytes() const {
  return std::max(peak_.load(std::memory_order_relaxed), bytes_in_use());
}

const void* FreeBlocks::thread_token() {
  static thread_local char token;
  return &token;
}

void* FreeBlocks::take(std::size_t size, const void* thread) {
  auto it = blocks_.find(size);
  if (it == blocks_.end() || it->second.empty()) return nullptr;
  auto& blocks = it->second;
  // Of the last few freed: the latest this thread freed, else the latest (blocks up to
  // kWarmBytes only).
  constexpr std::size_t kLook = 8;
  std::size_t at = blocks.size() - 1;
  if (thread && size <= kWarmBytes)
    for (std::size_t i = blocks.size(), seen = 0; i-- > 0 && seen < kLook; ++seen)
      if (blocks[i].thread == thread) {
        at = i;
        break;
      }
  void* p = blocks[at].block;
  blocks[at] = blocks.back();  // the latest freed takes its place among the latest few
  blocks.pop_back();
  bytes_ -= size;
  return p;
}

void FreeBlocks::put(std::size_t size, void* block, const void* thread) {
  blocks_[size].push_back({block, thread});
  bytes_ += size;
}

namespace {
std::size_t rounded_size(std::size_t bytes) {
  if (bytes >= HostAllocator::kLargeBlock) return (bytes + 4095) & ~std::size_t(4095);
  return bytes ? (bytes + 63) & ~std::size_t(63) : 64;
}

// The blocks a thread keeps aside (HostAllocator::keep_blocks_on_this_thread), the oldest
// going to its allocator's cache when a newer one needs the room.
struct ThreadBlocks {
  bool on = false;
  int next = 0;  // the slot the next block goes to once all are full
  std::size_t size[HostAllocator::kThreadBlocks] = {};
  void* block[HostAllocator::kThreadBlocks] = {};
  ~ThreadBlocks() {
    for (void* b : block) std::free(b);
  }
  void* take(std::size_t bytes) {
    for (int i = 0; i < HostAllocator::kThreadBlocks; ++i)
      if (block[i] && size[i] == bytes) return std::exchange(block[i], nullptr);
    return nullptr;
  }
  // Keeps `p`; what it displaces (or nullptr) goes back to the caller.
  void* put(std::size_t bytes, void* p, std::size_t* displaced_bytes) {
    int at = -1;
    for (int i = 0; i < HostAllocator::kThreadBlocks && at < 0; ++i)
      if (!block[i]) at = i;
    if (at < 0) {
      at = next;
      next = (next + 1) % HostAllocator::kThreadBlocks;
    }
    *displaced_bytes = size[at];
    size[at] = bytes;
    return std::exchange(block[at], p);
  }
};
thread_local ThreadBlocks tls_blocks [[gnu::tls_model("initial-exec")]];

bool kept_aside(std::size_t rounded) {
  return rounded >= HostAllocator::kLargeBlock && rounded <= HostAllocator::kThreadBlockBytes && tls_blocks.on;
}

}  // namespace

void HostAllocator::keep_blocks_on_this_thread() { tls_blocks.on = true; }

HostAllocator::~HostAllocator() { release_cached(); }

void* HostAllocator::allocate(std::size_t bytes) {
  const std::size_t rounded = rounded_size(bytes);
  void* p = kept_aside(rounded) ? tls_blocks.take(rounded) : nullptr;
  if (!p && rounded >= kLargeBlock) {
    const void* thread = FreeBlocks::thread_token();
    std::lock_guard lock(mutex_);
    p = free_.take(rounded, thread);
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
  std::size_t rounded = rounded_size(bytes);
  if (kept_aside(rounded)) {
    ptr = tls_blocks.put(rounded, ptr, &rounded);
    if (!ptr) return;
  }
  if (rounded >= kLargeBlock) {
    const void* thread = FreeBlocks::thread_token();
    std::lock_guard lock(mutex_);
    if (free_.bytes() + rounded <= cache_limit_) {
      free_.put(rounded, ptr, thread);
      return;
    }
  }
  std::free(ptr);
}

std::size_t HostAllocator::bytes_cached() const {
  std::lock_guard lock(mutex_);
  return free_.bytes();
}

void HostAllocator::release_cached() {
  std::lock_guard lock(mutex_);
  free_.release_all([](void* p) { std::free(p); });
}

CachingAllocator::CachingAllocator(std::string device_name, bool host_accessible, Backend backend)
    : device_name_(std::move(device_name)), host_accessible_(host_accessible), backend_(std::move(backend)) {}

CachingAllocator::~CachingAllocator() { release_cached(); }

std::size_t CachingAllocator::size_class(std::size_t bytes) {
  constexpr std::size_t kSmall = std::size_t(1) << 20;
  if (bytes < kSmall) return bytes ? (bytes + 511) & ~std::size_t(511) : 512;
  std::size_t power = kSmall;
  while (power * 2 <= bytes) power *= 2;
  for (std::size_t quarter = 0; quarter <= 4; ++quarter) {
    std::size_t size = power + quarter * (power / 4);
    if (size >= bytes) return size;
  }
  return power * 2;  // not reached: power + 4 quarters = 2 power > bytes
}

void* CachingAllocator::allocate(std::size_t bytes) {
  const std::size_t size = size_class(bytes);
  void* p = nullptr;
  {
    std::lock_guard lock(mutex_);
    p = free_.take(size);
  }
  if (!p) {
    std::string why;
    p = backend_.allocate(size, &why);
    if (!p) {  // out of memory: give the cache back and try once more
      release_cached();
      p = backend_.allocate(size, &why);
    }
    if (!p)
      fail(ErrorCode::resource_exhausted, "out of memory on {}: cannot allocate {} bytes ({} in use): {}",
           device_name_, bytes, bytes_in_use(), why);
    std::lock_guard lock(mutex_);
    reserved_ += size;
    ++raw_allocations_;
  }
  count_allocation(bytes);
  return p;
}

void CachingAllocator::deallocate(void* ptr, std::size_t bytes) {
  count_deallocation(bytes);
  const std::size_t size = size_class(bytes);
  std::lock_guard lock(mutex_);
  free_.put(size, ptr);
}

std::size_t CachingAllocator::bytes_cached() const {
  std::lock_guard lock(mutex_);
  return free_.bytes();
}

std::size_t CachingAllocator::bytes_reserved() const {
  std::lock_guard lock(mutex_);
  return reserved_;
}

int64_t CachingAllocator::raw_allocations() const {
  std::lock_guard lock(mutex_);
  return raw_allocations_;
}

void CachingAllocator::release_cached() {
  FreeBlocks blocks;  // freed outside the lock: the backend may be slow (cudaFree synchronises)
  {
    std::lock_guard lock(mutex_);
    std::swap(blocks, free_);
    reserved_ -= blocks.bytes();
  }
  blocks.release_all([&](void* p) { backend_.free(p); });
}

Allocator& host_allocator() {
  static HostAllocator* allocator = new HostAllocator("/job:localhost/task:0/device:CPU:0");
  return *allocator;
}

}  // namespace troupe
