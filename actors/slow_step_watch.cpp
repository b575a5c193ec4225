#include "actors/slow_step_watch.hpp"

#include <fmt/format.h>

#include <vector>

namespace troupe {

SlowStepWatch::SlowStepWatch(std::chrono::milliseconds first, Sink sink) : first_(first), sink_(std::move(sink)) {}

SlowStepWatch::~SlowStepWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (thread_.joinable()) thread_.join();
}

SlowStepWatch::Watched SlowStepWatch::watch(uint64_t step, std::function<std::string()> report) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = next_id_++;
  entries_.emplace(id, Entry{step, now, now + first_, std::move(report)});
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  changed_.notify_all();
  return Watched(this, id);
}

void SlowStepWatch::forget(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.erase(id);
}

void SlowStepWatch::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    auto due = std::chrono::steady_clock::time_point::max();
    for (auto& [id, e] : entries_) due = std::min(due, e.due);
    if (due == std::chrono::steady_clock::time_point::max()) {
      changed_.wait(lock);
      continue;
    }
    if (changed_.wait_until(lock, due) != std::cv_status::timeout) continue;
    const auto now = std::chrono::steady_clock::now();
    std::vector<std::pair<uint64_t, Entry>> ripe;
    for (auto& [id, e] : entries_)
      if (e.due <= now) {
        ripe.push_back({id, e});
        e.due = e.start + 2 * (now - e.start);  // again after twice as long
      }
    lock.unlock();
    for (auto& [id, e] : ripe) {
      const double seconds = std::chrono::duration<double>(now - e.start).count();
      std::string what = e.report();
      {
        std::lock_guard<std::mutex> relock(mutex_);
        if (!entries_.count(id)) continue;  // it ended meanwhile: the report may be of nothing
      }
      sink_(fmt::format("step {} has run for {:.1f} s and goes on; {}", e.step, seconds,
                        what.empty() ? "no node waits for an input (its kernels are running)" : what));
    }
    lock.lock();
  }
}

}  // namespace troupe
