#pragma once
// NodeMailbox: the mailbox of a node actor that runs on Troupe's fast path (node.hpp). Any
// thread puts into it; one thread at a time takes everything out (the one that claimed the
// node, see NodeActor). Items are kept in vectors swapped under a spin lock, so the steady state
// allocates nothing: the taker hands back the emptied vector of the last round.
// A node that waits for several inputs of a tag may have them wait here (Deferral): while it is
// idle, the inputs of the tag it waits for claim it only once they are all in (or kMaxDeferred
// of them), so it takes one turn per firing instead of one per input (TensorFlow's executor
// counts down a pending count per node for the same end).
#include <algorithm>
#include <atomic>
#include <functional>
#include <iterator>
#include <memory>
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

  // What the node waits for when its holder gives up the claim (take()): `left` more inputs of
  // `*tag` (of any one tag when null: the node holds none) before it can fire; left 0 or 1:
  // every input claims the node at once. `tag` points into the node's own state, which no one
  // changes while the node is unclaimed. A node that keeps other state than its inputs (per
  // frame, per step) or takes its inputs one by one defers only as kGate says.
  struct Deferral {
    uint32_t left = 0;
    const Tag* tag = nullptr;
  };
  // Deferral::left of a loop's NextIteration (next_iteration_node.hpp) that keeps the iteration
  // gate of one frame: `*tag` is that frame's oldest iteration not yet finished. The gate's
  // signal of any other iteration of the frame waits: until that one's has come, it changes
  // nothing the node does. (A signal sent from another worker than the loop's control's so
  // claims the node only when it may let an iteration start or end the loop: each claim moves
  // the node's state, and the frame state it tells of finished iterations, to that worker and
  // back.)
  static constexpr uint32_t kGate = UINT32_MAX;
  // At most this many inputs wait unclaimed (their items' room is the mailbox's for good).
  static constexpr std::size_t kMaxDeferred = 16;

  // Puts an item in; true when the node was idle and the caller now holds its claim (it must
  // run or schedule it).
  bool put(Item::Kind kind, uint32_t slot, const Tag& tag, Value&& value) {
    lock();
    items_.emplace_back(kind, slot, tag, std::move(value));  // built in place: an Item is ~140 bytes
    if (!claimed_ && defer_left_ > 1 && kind == Item::Kind::input) {
      if (defer_left_ == kGate) [[unlikely]] {
        if (slot == kControlSlot && items_.size() < kMaxDeferred && tag.step == defer_tag_->step &&
            tag.frame == defer_tag_->frame && tag.iteration != defer_tag_->iteration) {
          unlock();
          return false;
        }
        return claim_and_unlock();
      }
      // Unclaimed, and all that is in are inputs of the tag the node waits for (that of the
      // first in, if it waits for any): this one waits too unless it is the last the node needs
      // (or one too many to keep here). An input of another tag claims the node for them all.
      const Tag& waited = defer_tag_ ? *defer_tag_ : items_.front().tag;
      if (items_.size() < std::min<std::size_t>(defer_left_, kMaxDeferred) && waited == tag) {
        unlock();
        return false;
      }
    }
    return claim_and_unlock();
  }
  bool put(Call&& call) {
    lock();
    if (!calls_) calls_ = std::make_unique<std::vector<Call>>();
    calls_->push_back(std::move(call));
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
  // anything was; if nothing was, the claim is given up (a later put claims anew), the node
  // waiting for what `deferral` says.
  bool take(std::vector<Item>& items, std::vector<Call>& calls, const Deferral& deferral) {
    lock();
    if (items_.empty() && (!calls_ || calls_->empty())) {
      claimed_ = false;
      defer_left_ = deferral.left;
      defer_tag_ = deferral.tag;
      unlock();
      return false;
    }
    items.swap(items_);
    if (calls_) calls.swap(*calls_);
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
  // Under the lock, set when the claim was given up: the Deferral. (The calls, seldom any, are
  // kept behind a pointer, so that with the Deferral the mailbox is 48 bytes: it lies among the
  // node's hot fields.)
  uint32_t defer_left_ = 0;
  const Tag* defer_tag_ = nullptr;
  std::vector<Item> items_;
  std::unique_ptr<std::vector<Call>> calls_;
};
static_assert(sizeof(NodeMailbox) == 48, "the mailbox lies among a node's hot fields");

}  // namespace troupe
