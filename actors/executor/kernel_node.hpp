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
  // not fired yet is not. The average follows a rise by an eighth of it per firing but never
  // stays above twice the last firing: a first firing that paid for cold caches and page faults
  // (ten or a hundred times a warm one) is forgotten at the next, not after a dozen steps.
  static constexpr int64_t kCheapTicks = 10000;
  static constexpr int64_t kReportTicks = 250;
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
    // condition, Switch: 100-300 ticks, an eighth of which every other firing) out: each
    // report is a write to the line every node of the loop reads (measured, 0.43 reports an
    // iteration of the benchmark's independent loop without it), and the sum is compared with
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
