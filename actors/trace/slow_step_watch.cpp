#include "actors/trace/slow_step_watch.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "actors/trace/wait_chain.hpp"

namespace troupe {

SlowStepWatch::SlowStepWatch(std::chrono::milliseconds first, Report report, Sink sink)
    : first_(first), report_(std::move(report)), sink_(std::move(sink)) {}

SlowStepWatch::~SlowStepWatch() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  stop_.notify_all();
  if (thread_.joinable()) thread_.join();
}

SlowStepWatch::Watched SlowStepWatch::watch(uint64_t step, const void* what) {
  const auto now = std::chrono::steady_clock::now();
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = next_id_++;
  entries_.push_back(Entry{id, step, now, now + first_, what});
  // Due after every entry already here: the thread, asleep until the earliest of those (or for
  // `first` at most), needs no wake-up.
  if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  return Watched(this, id);
}

void SlowStepWatch::forget(uint64_t id) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.id == id; });
  if (it == entries_.end()) return;
  *it = entries_.back();
  entries_.pop_back();
}

bool SlowStepWatch::watched(uint64_t id) const {
  return std::any_of(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.id == id; });
}

void SlowStepWatch::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    auto due = std::chrono::steady_clock::now() + first_;
    for (auto& e : entries_) due = std::min(due, e.due);
    if (stop_.wait_until(lock, due, [&] { return stopping_; })) return;
    const auto now = std::chrono::steady_clock::now();
    std::vector<Entry> ripe;
    for (auto& e : entries_)
      if (e.due <= now) {
        ripe.push_back(e);
        e.due = e.start + 2 * (now - e.start);  // again after twice as long
      }
    for (auto& e : ripe) {
      lock.unlock();
      std::string what = report_(e.step, e.what);
      lock.lock();
      if (stopping_) return;
      if (!watched(e.id)) continue;  // it ended meanwhile: the report may be of nothing
      const double seconds = std::chrono::duration<double>(now - e.start).count();
      lock.unlock();
      sink_(fmt::format("step {} has run for {:.1f} s and goes on; {}", e.step, seconds,
                        what.empty() ? kKernelsRunning : what));
      lock.lock();
    }
  }
}

}  // namespace troupe
