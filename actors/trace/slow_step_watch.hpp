#pragma once
// Reports the steps of a session that run long (SessionOptions::slow_step_report): a thread of
// its own, started with the first step watched, wakes when the earliest watched step is due (and
// at least every `first` while none is), asks what that step waits for (`report`, which may block
// for a bounded time: it asks node actors, on a cluster every task) and hands the text to `sink`.
// A step is reported after `first`, again after twice that, four times, ... while it runs; the
// step itself is never touched. Watching a step costs a lock and a slot in a vector that stops
// growing at the steps in flight: no allocation, no wake-up of the thread. Thread-safe; the
// destructor stops the thread (a report under way is waited for).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace troupe {

class SlowStepWatch {
 public:
  // What step `step` waits for; `what` is the pointer it was watched with (the session's
  // executable or cluster signature, alive as long as the session).
  using Report = std::function<std::string(uint64_t step, const void* what)>;
  using Sink = std::function<void(const std::string&)>;
  SlowStepWatch(std::chrono::milliseconds first, Report report, Sink sink);
  ~SlowStepWatch();
  SlowStepWatch(const SlowStepWatch&) = delete;
  SlowStepWatch& operator=(const SlowStepWatch&) = delete;

  // Watches step `step` until the Watched returned is destroyed.
  class Watched {
   public:
    Watched(SlowStepWatch* watch, uint64_t id) : watch_(watch), id_(id) {}
    Watched(Watched&& other) noexcept : watch_(std::exchange(other.watch_, nullptr)), id_(other.id_) {}
    Watched& operator=(Watched&&) = delete;
    ~Watched() {
      if (watch_) watch_->forget(id_);
    }

   private:
    SlowStepWatch* watch_;
    uint64_t id_;
  };
  [[nodiscard]] Watched watch(uint64_t step, const void* what);

 private:
  struct Entry {
    uint64_t id, step;
    std::chrono::steady_clock::time_point start, due;
    const void* what;
  };
  void forget(uint64_t id);
  void loop();
  bool watched(uint64_t id) const;  // under mutex_

  const std::chrono::milliseconds first_;
  const Report report_;
  const Sink sink_;
  std::mutex mutex_;
  std::condition_variable stop_;
  std::vector<Entry> entries_;
  uint64_t next_id_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace troupe
