#include "actors/executor/frame_table.hpp"

#include <algorithm>

#include "core/fingerprint.hpp"

namespace troupe {

uint64_t child_frame_id(const Tag& parent, uint64_t name_hash) {
  // mix64 (core/fingerprint.hpp) over the parent's frame, iteration and the loop's name.
  uint64_t id = mix64(mix64(parent.frame ^ 0x9e3779b97f4a7c15ULL) + uint64_t(parent.iteration)) ^ mix64(name_hash);
  return id == 0 ? 1 : id;  // 0 is the root frame
}

Tag FrameTable::enter(const Tag& parent, const std::string& name, uint64_t name_hash, int exits, int enters) {
  Tag child{parent.step, child_frame_id(parent, name_hash), 0};
  std::lock_guard<std::mutex> lock(mutex_);
  // A failed step's Enter that fired before its node heard of the abort: the frame would never
  // be left (its Exits drop the step), so it is not made.
  if (dropped_.count(parent.step)) return child;
  auto it = frames_.try_emplace({child.step, child.frame}, Record{name, parent, exits, enters}).first;
  if (--it->second.enters_left <= 0 && it->second.exits_left <= 0) frames_.erase(it);
  return child;
}

void FrameTable::exited(const Tag& tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = frames_.find({tag.step, tag.frame});
  if (it != frames_.end() && --it->second.exits_left <= 0 && it->second.enters_left <= 0) frames_.erase(it);
}

std::optional<Tag> FrameTable::parent(const Tag& tag) const {
  if (tag.frame == 0) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = frames_.find({tag.step, tag.frame});
  if (it == frames_.end()) return std::nullopt;
  return it->second.parent;
}

std::optional<std::vector<int64_t>> FrameTable::iterations(const Tag& tag) const {
  std::vector<int64_t> out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (Tag t = tag; t.frame != 0;) {
    auto it = frames_.find({t.step, t.frame});
    if (it == frames_.end()) return std::nullopt;
    out.insert(out.begin(), t.iteration);
    t = it->second.parent;
  }
  return out;
}

std::string FrameTable::describe(const Tag& tag) const {
  std::string out;
  int levels = 0;
  std::lock_guard<std::mutex> lock(mutex_);
  for (Tag t = tag; t.frame != 0; ++levels) {
    auto it = frames_.find({t.step, t.frame});
    if (it == frames_.end()) break;
    out += levels == 0 ? "in frame '" : " (in frame '";
    out += it->second.name + "' iteration " + std::to_string(t.iteration);
    t = it->second.parent;
  }
  return out + std::string(std::size_t(std::max(levels - 1, 0)), ')');
}

int FrameTable::iteration_worker(const Tag& tag, int window, int workers) {
  // Above this many iterations at once, every iteration by number: the places would take more
  // memory per frame than they are worth (16 bytes each).
  constexpr int kMaxPlaced = 4096;
  const int by_number = int(uint64_t(tag.iteration) % uint64_t(std::max(workers, 1)));
  if (workers < 2 || window < 1 || window > kMaxPlaced) return by_number;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = frames_.find({tag.step, tag.frame});
  if (it == frames_.end()) return by_number;
  Record& r = it->second;
  if (r.placed.empty()) {
    r.placed.resize(std::size_t(window));
    r.running.assign(std::size_t(workers), 0);
  }
  Placed& p = r.placed[uint64_t(tag.iteration) % r.placed.size()];
  if (p.iteration == tag.iteration) return p.worker;
  // A later iteration holds the place: this one finished long ago (the window), so no node of
  // it is left to agree with.
  if (p.iteration > tag.iteration || std::size_t(workers) != r.running.size()) return by_number;
  // The place's iteration, `window` or more before this one, has finished (this one could not
  // have started otherwise), whether or not its gate has been heard here yet.
  if (p.running) --r.running[std::size_t(p.worker)];
  int best = by_number;
  for (int w = 0; w < workers; ++w)
    if (r.running[std::size_t(w)] < r.running[std::size_t(best)]) best = w;
  p = Placed{tag.iteration, int16_t(best), true};
  ++r.running[std::size_t(best)];
  return best;
}

void FrameTable::iteration_finished(const Tag& tag) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = frames_.find({tag.step, tag.frame});
  if (it == frames_.end() || it->second.placed.empty()) return;
  Record& r = it->second;
  Placed& p = r.placed[uint64_t(tag.iteration) % r.placed.size()];
  if (p.iteration != tag.iteration || !p.running) return;
  p.running = false;
  --r.running[std::size_t(p.worker)];
}

void FrameTable::drop_step(uint64_t step) {
  constexpr std::size_t kRemembered = 1024;
  std::lock_guard<std::mutex> lock(mutex_);
  frames_.erase(frames_.lower_bound({step, 0}), frames_.lower_bound({step + 1, 0}));
  if (dropped_.insert(step).second) {
    dropped_order_.push_back(step);
    if (dropped_order_.size() > kRemembered) {
      dropped_.erase(dropped_order_.front());
      dropped_order_.pop_front();
    }
  }
}

bool FrameTable::dropped(uint64_t step) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_.count(step) != 0;
}

std::size_t FrameTable::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return frames_.size();
}

}  // namespace troupe
