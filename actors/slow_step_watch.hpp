#pragma once
// Reports the steps of a session that run long (SessionOptions::slow_step_report): a thread of
// its own, started with the first step watched, wakes when the earliest watched step is due,
// asks it what it waits for (the report function the step registered, which may block for a
// bounded time: it asks node actors, on a cluster every task) and hands the text to the sink.
// A step is reported after `first`, again after twice that, four times, ... while it runs; the
// step itself is never touched. Thread-safe; the destructor stops the thread (an unfinished
// report function is waited for).
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <utility>

namespace troupe {

class SlowStepWatch {
 public:
  using Sink = std::function<void(const std::string&)>;
  SlowStepWatch(std::chrono::milliseconds first, Sink sink);
  ~SlowStepWatch();
  SlowStepWatch(const SlowStepWatch&) = delete;
  SlowStepWatch& operator=(const SlowStepWatch&) = delete;

  // Watches step `step` until the Watched returned is destroyed; `report` says what it waits for.
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
  [[nodiscard]] Watched watch(uint64_t step, std::function<std::string()> report);

 private:
  struct Entry {
    uint64_t step;
    std::chrono::steady_clock::time_point start, due;
    std::function<std::string()> report;
  };
  void forget(uint64_t id);
  void loop();

  const std::chrono::milliseconds first_;
  const Sink sink_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::map<uint64_t, Entry> entries_;
  uint64_t next_id_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace troupe
