#pragma once
// KernelNode (NodeKind::kernel): a node that runs an OpKernel.
// Takes: every data input of a tag (hoisted constants are preset) and every control input, or
//   the start signal of a source node.
// Sends: the kernel's outputs, each to each consumer with the tag; an output the kernel marks
//   dead goes on dead (a Switch's untaken side). If any input is dead it sends dead outputs
//   without running. A kernel error goes to the step actor.
// Per tag: the inputs so far, in a Pending slot (none at all for a node of one input), freed
//   when it fires. The inputs are let go of before the outputs go on.
#include <algorithm>
#include <climits>
#include <cstdlib>

#include "actors/executor/node.hpp"

namespace troupe {

// Which of a kernel's firings KernelNode times (reads the clock before and after): every firing
// of a kernel that is not cheap, the first two of any (the second forgets the first's cold
// caches), and after them one in kEvery of a cheap one. Reading the clock twice is a sizeable
// part of a chain node's whole turn, and a cheap kernel's cost moves little from firing to
// firing; one that turns expensive (a larger input) is known for it within kEvery firings and
// timed at each from then on.
class FiringTimer {
 public:
  static constexpr int kEvery = 8;
  // Whether the next firing is timed; `cheap`: the kernel's cost so far is below kCheapTicks.
  bool next(bool cheap) {
    if (firsts_ < 2 || !cheap) {
      if (firsts_ < 2) ++firsts_;
      untimed_ = 0;
      return true;
    }
    if (untimed_ > 0) {
      --untimed_;
      return false;
    }
    untimed_ = kEvery - 1;
    return true;
  }

 private:
  uint8_t firsts_ = 0;   // of the first two firings, those timed
  uint8_t untimed_ = 0;  // firings left untimed before the next timed one
};

class KernelNode final : public NodeActor {
 public:
  using NodeActor::NodeActor;  // with the kernel, which the base keeps among its hot fields

 private:
  void fire(const Tag& tag, Tensor* inputs, bool dead) override;
  // The firing; `traced_since`: when it started, in a traced step (0: not traced).
  [[gnu::always_inline]] inline void run(const Tag& tag, Tensor* inputs, bool dead, int64_t traced_since);
  [[gnu::noinline, gnu::cold]] void fire_maybe_traced(const Tag& tag, Tensor* inputs, bool dead);
  // The bytes of a firing's inputs, which decide whether it leases a core (devices/cpu_threads.hpp).
  std::size_t input_bytes(const Tensor* inputs) const;
  // A traced step's firing (core/trace.hpp): the kernel's slice from `start` to now, and the
  // device's memory in use then.
  void trace_firing(const Tag& tag, const Tensor* inputs, int64_t start);

  // The cost of a firing, in trace::now()'s ticks (TSC cycles, or ns), averaged: a kernel below
  // kCheapTicks is cheap (node.hpp), as a Const, a shape op or a scalar add are; one that has
  // not fired yet is not. The average follows a rise by an eighth of it per timed firing
  // (FiringTimer) but never stays above twice the last one: a first firing that paid for cold
  // caches and page faults (ten or a hundred times a warm one) is forgotten at the second, not
  // after a dozen steps.
  static constexpr int64_t kCheapTicks = 10000;
  static constexpr int64_t kReportTicks = 250;
  FiringTimer timer_;
  bool fired_ = false;
  int64_t reported_ = 0;  // the cost last added to the loop's IterationSpread
  void account(int64_t ticks) {
    const int64_t cost = fired_ ? std::min((7 * int64_t(cost_) + ticks) / 8, 2 * ticks) : ticks;
    fired_ = true;
    cost_ = int32_t(std::min<int64_t>(cost, INT32_MAX));
    cheap_ = cost < kCheapTicks;
    // Into the loop's sum when it has moved by more than an eighth since last reported, and by
    // more than kReportTicks (by the node's own actor only: its replicas run the same kernel on
    // other iterations). The floor keeps the jitter of the loop's cheap nodes (its counter,
    // condition, Switch: a few hundred ticks, an eighth of which every other firing) out: each
    // report is a write to the line every node of the loop reads, and the sum is compared with
    // thousands of ticks.
    if (me_->spread && replica_ == 0 && std::abs(cost - reported_) * 8 > reported_ &&
        std::abs(cost - reported_) > kReportTicks) {
      me_->spread->cost.fetch_add(cost - reported_, std::memory_order_relaxed);
      if (me_->carried) me_->spread->carried.fetch_add(cost - reported_, std::memory_order_relaxed);
      reported_ = cost;
    }
  }

  // Interned once for the tracer; the input shapes again when they change.
  uint32_t trace_op_ = 0, trace_node_ = 0, trace_memory_ = 0, trace_shapes_ = 0;
  uint16_t trace_row_ = 0;
  uint64_t trace_shapes_hash_ = 0;
};

}  // namespace troupe
