#pragma once
// Allocator: where a tensor's bytes live. Each device owns one; it counts the bytes in use and
// the peak, both readable from any thread.
#include <atomic>
#include <cstddef>
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

  std::size_t bytes_in_use() const { return in_use_.load(std::memory_order_relaxed); }
  std::size_t peak_bytes() const { return peak_.load(std::memory_order_relaxed); }
  void reset_peak() { peak_.store(bytes_in_use(), std::memory_order_relaxed); }

 protected:
  void count_allocation(std::size_t bytes);
  void count_deallocation(std::size_t bytes) {
    in_use_.fetch_sub(bytes, std::memory_order_relaxed);
  }

 private:
  std::atomic<std::size_t> in_use_{0};
  std::atomic<std::size_t> peak_{0};
};

// 64-byte aligned host memory (the alignment AVX-512 loads and oneDNN prefer).
class HostAllocator final : public Allocator {
 public:
  explicit HostAllocator(std::string device_name) : device_name_(std::move(device_name)) {}
  void* allocate(std::size_t bytes) override;
  void deallocate(void* ptr, std::size_t bytes) override;
  const std::string& device_name() const override { return device_name_; }
  bool host_accessible() const override { return true; }

 private:
  std::string device_name_;
};

// The allocator of this process's CPU:0, used when no other is named.
Allocator& host_allocator();

}  // namespace troupe
