#pragma once
// NodeMailbox: the mailbox of a node actor that runs on Troupe's fast path (node.hpp). Any
// thread puts into it; one thread at a time takes everything out (the one that claimed the
// node, see NodeActor). Items are kept in vectors swapped under a spin lock, so the steady state
// allocates nothing: the taker hands back the emptied vector of the last round.
#include <atomic>
#include <functional>
#include <iterator>
#include <vector>

#include "actors/messages.hpp"

namespace troupe {

class NodeMailbox {
 public:
  struct Item {
    enum class Kind : uint8_t { input, abort };
    Kind kind = Kind::input;
    uint32_t slot = 0;
    Tag tag;  // abort: tag.step
    Value value;
  };
  // Something to run in the node's turn; `stopped`: the node has been stopped (it must then
  // leave the node's state alone, which its actor may be freeing).
  using Call = std::function<void(bool stopped)>;

  // Room for `n` items without allocating (the taker's vector should get the same).
  void reserve(std::size_t n) { items_.reserve(n); }

  // Puts an item in; true when the node was idle and the caller now holds its claim (it must
  // run or schedule it).
  bool put(Item::Kind kind, uint32_t slot, const Tag& tag, Value&& value) {
    lock();
    items_.emplace_back(kind, slot, tag, std::move(value));  // built in place: an Item is ~140 bytes
    return claim_and_unlock();
  }
  bool put(Call&& call) {
    lock();
    calls_.push_back(std::move(call));
    return claim_and_unlock();
  }

  // For the claim's holder: puts items[from..] back ahead of what has come since, keeping the
  // claim (the holder hands the node on to another thread); `items` is empty after.
  void put_back(std::vector<Item>& items, std::size_t from) {
    lock();
    items_.insert(items_.begin(), std::make_move_iterator(items.begin() + std::ptrdiff_t(from)),
                  std::make_move_iterator(items.end()));
    unlock();
    items.clear();
  }

  // For the claim's holder: moves what is in into `items` and `calls` (both empty), true if
  // anything was; if nothing was, the claim is given up (a later put claims anew).
  bool take(std::vector<Item>& items, std::vector<Call>& calls) {
    lock();
    if (items_.empty() && calls_.empty()) {
      claimed_ = false;
      unlock();
      return false;
    }
    items.swap(items_);
    calls.swap(calls_);
    unlock();
    return true;
  }

 private:
  void lock() {
    while (locked_.exchange(true, std::memory_order_acquire))
      while (locked_.load(std::memory_order_relaxed)) __builtin_ia32_pause();
  }
  void unlock() { locked_.store(false, std::memory_order_release); }
  bool claim_and_unlock() {
    const bool claimed = !claimed_;
    claimed_ = true;
    unlock();
    return claimed;
  }

  std::atomic<bool> locked_{false};
  bool claimed_ = false;  // under the lock: someone runs the node or has scheduled it
  std::vector<Item> items_;
  std::vector<Call> calls_;
};

}  // namespace troupe
