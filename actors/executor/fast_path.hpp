#pragma once
// The fast path's declarations outside NodeActor (fast_path.cpp; node.hpp's "The fast path"):
// its tuning constants, the two jobs that run fast nodes on CAF's workers (NodeRunner, a node's
// turn; ReadyBatch, ready nodes handed to another worker), and the senders every node kind and
// the step actor send inputs with. The jobs reach into NodeActor (its friends); the senders are
// defined inline at the end of node.hpp, where NodeActor is complete.
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "actors/executor/executable.hpp"

namespace troupe {

class NodeActor;

// -- tuning (costs in trace::now()'s ticks) --

// The cost of a turn of a node that runs no kernel, or of a kernel node that has not fired
// (a tiny one, NodePlan::tiny; any other starts expensive whatever this says).
constexpr int32_t kTurnTicks = 300;
// The cost of the nodes waiting on a thread from which half are offered to an idle worker:
// less is not worth the trip to another core.
constexpr int64_t kOfferTicks = 20000;
// Or when at least kOfferNodes wait and they cost kOfferNodesTicks: many cheap nodes, as a
// wide graph larger than the cache has, each a miss to memory or more whichever core runs it,
// so the trip costs the other core little (a loop's few cheap nodes seldom count as many).
// Eight: a list holds only nodes that can fire (their inputs wait in their mailboxes until
// then), each a whole firing, not one input.
constexpr std::size_t kOfferNodes = 8;
constexpr int64_t kOfferNodesTicks = 2000;
// The cost of an expensive node for which a sleeping worker is woken (a wake-up takes tens of
// microseconds; this is about a hundred).
constexpr int64_t kWakeTicks = 250000;
// A cheap node beside a loop's chain (NodePlan::side) costing at least this goes to a worker
// that has nothing to do: more than a trip to the other core (and more than moving its
// inputs there, move_ticks()).
constexpr int64_t kSideTicks = 2000;
// Inputs read on another core than the one that wrote them cost about a tick per this many
// bytes, each line fetched from the writing core's cache.
constexpr int64_t kBytesPerMoveTick = 8;
// The cost of an iteration of a loop (its kernels') above which its iterations spread over
// the workers (spread()): several times what handing one to another core costs.
constexpr int64_t kSpreadTicks = 12000;
// The cost of a node's turn below which it is not spread with its iteration (spread_worker).
constexpr int64_t kSpreadNodeTicks = 1000;
// 1/kCarriedShare of an iteration's cost, carried to the next, still spreads the loop: more,
// and the iterations run one after the other anyway, each on another core than its values.
constexpr int64_t kCarriedShare = 4;
// Turns of nodes made ready that one thread runs in a row, after which the rest go to the
// scheduler's queues: a worker's other jobs (a step actor's deadline, another step) get a turn.
constexpr int kInlineTurns = 16384;
// Rounds of taking from the mailbox in one turn of a node (drain()): then it queues again,
// so that one busy node does not hold its worker.
constexpr int kDrainRounds = 4;
// Room a thread's ready list gets at its first use: a step of a wide graph does not grow it.
constexpr std::size_t kReadyRoom = 1024;
// Consumers whose mailboxes are prefetched ahead of the one being sent to: their misses overlap.
constexpr std::size_t kPrefetchAhead = 4;
// Cache lines of a node's hot fields prefetch_fields() fetches at most (they span fewer).
constexpr int kHotFieldLines = 16;

// -- jobs --

// A fast node's turn as a job of CAF's workers (one per node, NodeActor::runner_): it holds a
// reference to the node's actor while queued (hold_actor), and runs the node, then the nodes
// its turn made ready on this thread.
class NodeRunner final : public Job {
 public:
  explicit NodeRunner(NodeActor* node) : node_(node) {}
  subtype_t subtype() const override { return unspecified; }
  resume_result resume(caf::execution_unit* unit, std::size_t) override;
  void intrusive_ptr_add_ref_impl() override;
  void intrusive_ptr_release_impl() override;

 private:
  NodeActor* node_;
};

// Ready nodes given to another worker: it runs them as its own ready list. Reference-counted
// on its own; freed once run (or when an offer of it fails).
class ReadyBatch final : public Job {
 public:
  explicit ReadyBatch(std::vector<NodeActor*> nodes) : nodes_(std::move(nodes)) {}
  subtype_t subtype() const override { return unspecified; }
  resume_result resume(caf::execution_unit* unit, std::size_t) override;
  void intrusive_ptr_add_ref_impl() override { refs_.fetch_add(1, std::memory_order_relaxed); }
  void intrusive_ptr_release_impl() override {
    if (refs_.fetch_sub(1, std::memory_order_acq_rel) == 1) delete this;
  }

 private:
  std::vector<NodeActor*> nodes_;
  std::atomic<int> refs_{1};  // the job's
};

// -- senders (inline, at the end of node.hpp) --

// Sends an input to a node: into the mailbox of `fast` when it runs on the fast path (non-null),
// else as a CAF message to `actor`.
inline void send_to(caf::execution_unit* unit, NodeActor* fast, const caf::actor& actor, const Tag& tag, uint32_t slot,
                    Value&& value);
// The same to a consumer: for a node with several actors (NodePlan::replicas), the replica of
// the worker the tag's iteration runs on, `replica` when the sender is itself a replica (in
// the same iteration: it runs there too), else as the partition's frame state says
// (NodeActor::place).
inline void deliver(caf::execution_unit* unit, const Target& to, const Tag& tag, uint32_t slot, Value&& value,
                    int replica);
// The same to node `id` of `part`.
inline void send_to_node(caf::execution_unit* unit, const ExecPlan& part, int id, const Tag& tag, uint32_t slot,
                         Value&& value);

}  // namespace troupe
