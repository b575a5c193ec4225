#pragma once
// Allocator: where a tensor's bytes live. Each device owns one; it counts the bytes in use and
// the peak, both readable from any thread.
#include <atomic>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>
#include <cstddef>
#include <cstdint>
#include <string>

namespace troupe {

class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(std::size_t bytes) = 0;
  virtual void deallocate(void* ptr, std::size_t bytes) = 0;
  // The device whose memory this is, e.g. "/job:localhost/task:0/device:CPU:0".
  virtual const std::string& device_name() const = 0;
  // True if the CPU may read and write the memory directly.
  virtual bool host_accessible() const = 0;

  // Bytes handed out and not yet given back (exact once no thread allocates or frees).
  std::size_t bytes_in_use() const;
  // The most bytes in use at once since the allocator was made or reset_peak() last ran. Exact
  // where one thread allocates; where several do, each thread's count since its last flush
  // (under kFlushBytes, below) reaches the total only at the flush, so the peak may be off by
  // less than kFlushBytes per thread allocating meanwhile. Never below bytes_in_use().
  std::size_t peak_bytes() const;
  void reset_peak() { peak_.store(bytes_in_use(), std::memory_order_relaxed); }

  // A thread's count goes into the total once it has moved this far from it.
  static constexpr int64_t kFlushBytes = int64_t(1) << 20;
  static constexpr int kStripes = 16;

 protected:
  void count_allocation(std::size_t bytes);
  void count_deallocation(std::size_t bytes);

 private:
  // The count is kept in stripes, one cache line each, a thread always using the same one (the
  // threads of a process take them in turn): every tensor's allocation and release changes it,
  // from every thread, and one shared line would move between the cores with each of them
  // (docs/performance.md, "Measured settings and kernels"). A stripe's count goes into
  // flushed_ when it reaches kFlushBytes either way, so the peak (taken at each allocation from
  // flushed_ and the allocating thread's stripe) reads lines that seldom change.
  struct alignas(64) Stripe {
    std::atomic<int64_t> bytes{0};
  };
  Stripe stripes_[kStripes];
  alignas(64) std::atomic<int64_t> flushed_{0};
  std::atomic<std::size_t> peak_{0};
  char pad_[64 - sizeof(std::atomic<int64_t>) - sizeof(std::atomic<std::size_t>)];
};

// Freed blocks kept for reuse, by exact size, with their total. Not thread-safe: the
// allocator that owns it guards it with its mutex.
//
// A block of up to 512 KiB is handed out again preferably to the thread that freed it: that
// thread read it last, so its lines are in that core's cache, and writing them there costs no
// transfer from another core's. Among the few blocks of a size freed last, the caller's latest
// is taken; else the latest of all.
class FreeBlocks {
 public:
  // The largest block handed back preferably to the thread that freed it: one that fits a
  // core's cache (a larger one has left it by the time it is reused, so preferring it gains
  // nothing).
  static constexpr std::size_t kWarmBytes = std::size_t(512) << 10;
  // A cached block of `size` bytes, or nullptr; `thread`: the caller's thread_token().
  void* take(std::size_t size, const void* thread = nullptr);
  void put(std::size_t size, void* block, const void* thread = nullptr);
  std::size_t bytes() const { return bytes_; }
  template <class Free>
  void release_all(Free&& free) {  // hands every block to free(block) and forgets them
    for (auto& [size, blocks] : blocks_)
      for (auto& b : blocks) free(b.block);
    blocks_.clear();
    bytes_ = 0;
  }
  // What tells the calling thread apart (the address of a thread_local).
  static const void* thread_token();

 private:
  struct Block {
    void* block;
    const void* thread;  // which freed it
  };
  std::unordered_map<std::size_t, std::vector<Block>> blocks_;
  std::size_t bytes_ = 0;
};

// 64-byte aligned host memory (the alignment AVX-512 loads and oneDNN prefer).
//
// Large blocks (kLargeBlock and more, rounded up to 4 KiB) are cached when freed and handed out
// again for the same rounded size: a training step allocates the same sizes every step, and a
// fresh large block costs glibc an mmap and the kernel a page fault per page on first touch. At
// most `cache_limit` bytes stay cached; past that, blocks are returned to the system.
// bytes_in_use() counts blocks handed out, not cached ones. Safe to call from any thread.
//
// A thread that runs kernels (a scheduler worker, keep_blocks_on_this_thread()) also keeps the
// last few blocks of up to 512 KiB it freed aside for itself, taken again without the mutex: the
// next kernel there writes a block still in that core's cache, and two workers do not meet at
// the mutex several times per small firing. At most kThreadBlocks per thread, freed when the
// thread ends, not among bytes_cached() nor given back by release_cached(); any host allocator's
// block serves any other (all are aligned_alloc'd), so the aside is one per thread, not per
// allocator.
class HostAllocator final : public Allocator {
 public:
  static constexpr std::size_t kLargeBlock = std::size_t(64) << 10;
  explicit HostAllocator(std::string device_name, std::size_t cache_limit = std::size_t(2) << 30)
      : device_name_(std::move(device_name)), cache_limit_(cache_limit) {}
  ~HostAllocator() override;
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  const std::string& device_name() const override { return device_name_; }
  bool host_accessible() const override { return true; }

  std::size_t bytes_cached() const;
  void release_cached();  // returns every cached block to the system
  // Lets the calling thread keep blocks aside (above); for threads that run kernels for long.
  static void keep_blocks_on_this_thread();
  static constexpr int kThreadBlocks = 4;
  static constexpr std::size_t kThreadBlockBytes = FreeBlocks::kWarmBytes;  // the largest kept aside

 private:
  std::string device_name_;
  std::size_t cache_limit_;
  mutable std::mutex mutex_;  // guards free_; takes no other lock (std::free may run under it)
  FreeBlocks free_;  // by rounded size
};

// A size-class cache in front of a raw allocator (cudaMalloc for a GPU): freed blocks are kept
// by size class and handed out again, so a training step, which allocates the same sizes every
// step, makes no raw allocation once the first step has run. Classes: multiples of 512 bytes
// below 1 MiB; above, the next of 2^k, 1.25, 1.5 and 1.75 x 2^k (at most a quarter wasted).
// When the raw allocator fails, every cached block is released and the allocation tried once
// more. Counts bytes in use (requested sizes) and the peak like every Allocator; the raw
// allocations and the bytes cached are counted too. Safe to call from any thread.
class CachingAllocator final : public Allocator {
 public:
  struct Backend {
    // nullptr when the memory cannot be had, with the reason (e.g. CUDA's error) in *why.
    std::function<void*(std::size_t bytes, std::string* why)> allocate;
    std::function<void(void* ptr)> free;
  };
  CachingAllocator(std::string device_name, bool host_accessible, Backend backend);
  ~CachingAllocator() override;
  // Throws resource_exhausted naming the device and the backend's reason.
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  const std::string& device_name() const override { return device_name_; }
  bool host_accessible() const override { return host_accessible_; }

  static std::size_t size_class(std::size_t bytes);
  std::size_t bytes_cached() const;
  std::size_t bytes_reserved() const;  // held from the raw allocator: in use or cached
  int64_t raw_allocations() const;     // calls to the backend's allocate that succeeded
  void release_cached();

 private:
  std::string device_name_;
  bool host_accessible_;
  Backend backend_;
  // Guards free_, reserved_ and raw_allocations_; the backend (cudaMalloc) is called outside it.
  mutable std::mutex mutex_;
  FreeBlocks free_;  // by size class
  std::size_t reserved_ = 0;
  int64_t raw_allocations_ = 0;
};

// The allocator of this process's CPU:0, used when no other is named.
Allocator& host_allocator();

}  // namespace troupe
