// The fast path (node.hpp, "The fast path"): how values reach node actors and how those that
// run on it are scheduled: the outputs sent to the consumers' mailboxes (with the mailboxes
// prefetched a few consumers ahead), the ready lists of the thread that runs them, the NodeRunner
// and the ReadyBatch that take their turns, the hand-over of ready nodes to idle workers, the
// spreading of a loop's iterations over the workers, and the stop. One file, so the sending
// and the posting inline into each other. The node protocol (what a node does with an input,
// firing, errors) is node.cpp's.
#include "actors/executor/fast_path.hpp"

#include <algorithm>

#include "actors/executor/node.hpp"
#include "actors/scheduler.hpp"
#include "core/allocator.hpp"

namespace troupe {
namespace {

// The fast path's state of this thread while it runs fast nodes (a NodeRunner's or a ReadyBatch's turn):
// the execution unit it runs them on, the cheap nodes made ready, to run on this thread in turn
// after the current one (claimed; no reference held, see schedule()), and the first expensive
// node made ready by the current node's turn, run here only if nothing else is.
struct LocalReady {
  std::vector<NodeActor*> nodes;
  std::size_t head = 0;
  int64_t cost = 0;  // of the nodes waiting (from head on), in trace::now()'s ticks; pinned ones not counted
  std::size_t pinned = 0;  // of the nodes waiting, those pinned here (NodeActor::spread)
  bool empty() const { return head == nodes.size(); }
};
thread_local bool tls_running [[gnu::tls_model("initial-exec")]] = false;
thread_local caf::execution_unit* tls_unit [[gnu::tls_model("initial-exec")]] = nullptr;
thread_local LocalReady* tls_ready [[gnu::tls_model("initial-exec")]] = nullptr;
thread_local NodeActor* tls_expensive [[gnu::tls_model("initial-exec")]] = nullptr;
// The turn running on this thread is of a node of a loop that spreads its iterations, one
// that goes with its iteration (NodeActor::spread): what it makes ready of its iteration here
// runs next, so each iteration is taken to its end before the next is taken further (else
// every iteration in flight finishes late, and the loop's window of parallel_iterations fills).
thread_local bool tls_spread_turn [[gnu::tls_model("initial-exec")]] = false;
thread_local std::unique_ptr<LocalReady> tls_ready_owner;  // frees it when the thread ends

// Whether this thread's execution unit is a worker of Troupe's scheduling policy (the runtime
// installs it unless TROUPE_SCHEDULER=caf), which can hand ready nodes to idle workers.
thread_local caf::execution_unit* tls_checked_unit [[gnu::tls_model("initial-exec")]] = nullptr;
thread_local bool tls_ours [[gnu::tls_model("initial-exec")]] = false;

bool ours(caf::execution_unit* unit) {
  if (unit != tls_checked_unit) {
    tls_checked_unit = unit;
    tls_ours = dynamic_cast<SchedulingPolicy::OurWorker*>(unit) != nullptr;
  }
  return tls_ours;
}

// Marks this thread as running fast nodes on `unit` for its lifetime (a job's resume).
struct OnFastPath {
  explicit OnFastPath(caf::execution_unit* unit) {
    tls_running = true;
    tls_unit = unit;
  }
  ~OnFastPath() {
    tls_running = false;
    tls_unit = nullptr;
  }
};

// Puts `node` first among the nodes waiting on `ready` (before the head when there is room).
void push_first(LocalReady& ready, NodeActor* node) {
  if (ready.head > 0) ready.nodes[--ready.head] = node;
  else ready.nodes.insert(ready.nodes.begin(), node);
}

LocalReady& local_ready() {
  if (!tls_ready) {
    // A thread that runs node actors runs kernels: it keeps the blocks they free at hand.
    HostAllocator::keep_blocks_on_this_thread();
    tls_ready_owner = std::make_unique<LocalReady>();
    tls_ready_owner->nodes.reserve(kReadyRoom);
    tls_ready = tls_ready_owner.get();
  }
  return *tls_ready;
}

}  // namespace

void NodeActor::set_up_fast_path() {
  fast_ = me_->kind != NodeKind::variable && me_->kind != NodeKind::queue;
  if (fast_) {
    // The mailbox's vectors get their room here, beside the actor, not at the first input on
    // whichever thread sends it: the actors are spawned by threads whose heaps were made ready
    // for them in huge pages (executable.cpp), while a vector grown in a step takes fresh 4 KiB
    // pages of a worker's heap, a fault each. Room for two items for a node of two inputs or
    // more (its inputs of a tag may wait together: deferral()), one for any other; the two
    // vectors are swapped at each take, so each would grow in a step of its own, faulting in a
    // large graph's first steps. An item is 136 bytes (below), so room beyond two items costs the
    // set-up more than it saves.
    static_assert(sizeof(NodeMailbox::Item) == 136);
    const std::size_t room = std::size_t(std::clamp(expected_, 1, 2));
    mailbox_.reserve(room);
    taken_.reserve(room);
  }
  // A kernel node's firings are timed (kernel_node.hpp); until then it is expensive unless
  // its inputs and outputs are known to be tiny (NodePlan::tiny).
  cheap_ = me_->kind != NodeKind::kernel || me_->tiny;
  spreads_ = fast_ && me_->spread;
  side_ = me_->side;
  // A kernel node takes its inputs into a Pending slot and keeps nothing else; one of a spread
  // loop may move to another worker with an input (drain()) and takes each as it comes, unless
  // it is on the way to the next iteration (carried: the loop's condition and Switch), which
  // stays on the loop's chain whatever its cost (spreads_now()): deferring, it takes one turn
  // an iteration, not one per input.
  defers_ = fast_ && (!spreads_ || me_->carried) && me_->kind == NodeKind::kernel && expected_ >= 2;
}

void NodeActor::post(caf::execution_unit* unit, const Tag& tag, uint32_t slot, Value&& value) {
  if (!mailbox_.put(NodeMailbox::Item::Kind::input, slot, tag, std::move(value))) return;
  if (spreads_ && tls_running && spread(tag)) return;
  schedule(unit);
}

namespace {
std::atomic<int64_t> spread_ticks{0};  // 0: kSpreadTicks (set_spread_ticks stores ticks + 1)
}  // namespace

void NodeActor::set_spread_ticks(int64_t ticks) { spread_ticks.store(ticks + 1, std::memory_order_relaxed); }

int NodeActor::iteration_worker(const Tag& tag) const { return me_->replicas > 1 ? replica_ : place(tag); }

int NodeActor::place(const Tag& tag) const {
  // A node with replicas has one per worker; another asks on a worker of ours (spread()).
  const int workers = me_->replicas > 1                  ? me_->replicas
                      : tls_running && ours(tls_unit) ? int(SchedulingPolicy::worker_count(tls_unit))
                                                         : 1;
  return plan_->frames.iteration_worker(tag, me_->spread ? me_->spread->window : 1, workers);
}

int NodeActor::spread_worker(const Tag& tag) const { return spreads_now() ? iteration_worker(tag) : -1; }

bool NodeActor::spreads_now() const {
  if (!me_->spread) return false;
  const int64_t set = spread_ticks.load(std::memory_order_relaxed);
  const int64_t above = set ? set - 1 : kSpreadTicks;
  // Spread only while an iteration costs more than a trip to another core, and at most a quarter
  // of it (kCarriedShare) feeds the next iteration (else the iterations run one after the other anyway, each on
  // another core than its values); and only a node whose turn costs more than the trip (a cheap
  // one, such as the loop's own Merge, Switch or counter, runs where it is made ready: handed
  // between the workers every iteration, it would cost more in trips than it saves). Never a
  // node on the way to the next iteration (carried: the loop's Switch, condition, counter):
  // iteration k + 1's turn waits for k's, so going with each iteration's worker only moves the
  // chain from core to core. (Judged by its cost alone, such a node would spread after one slow
  // firing and, each firing then on a cold core, stay slow enough to keep spreading.) The
  // node's own reasons are looked at first: the loop's sums are a line that another core
  // writes now and then, a miss to read, and this is asked at every input posted to a node of
  // the loop.
  if (above > 0 && (me_->carried || cost_ < kSpreadNodeTicks)) return false;
  const int64_t cost = me_->spread->cost.load(std::memory_order_relaxed);
  if (cost < above || (above > 0 && me_->spread->carried.load(std::memory_order_relaxed) * kCarriedShare > cost) ||
      !tls_running || !ours(tls_unit))
    return false;
  return SchedulingPolicy::worker_count(tls_unit) >= 2;
}

void NodeActor::send_to_worker(int worker) {
  hold_actor(ctrl());  // the job's
  SchedulingPolicy::send_to(tls_unit, std::size_t(worker), &runner_);
}

bool NodeActor::spread(const Tag& tag) {
  const int to = spread_worker(tag);
  if (to < 0) return false;
  if (std::size_t(to) != SchedulingPolicy::worker_index(tls_unit)) {
    send_to_worker(to);
    return true;
  }
  // This iteration's worker: the node runs here whatever it costs, beside the values of the
  // iteration made here.
  pin_here(/*first=*/tls_spread_turn);
  return true;
}

void NodeActor::pin_here(bool first) {
  LocalReady& ready = local_ready();
  pinned_ = true;
  ++ready.pinned;
  if (first) push_first(ready, this);
  else ready.nodes.push_back(this);
}

void NodeActor::post_abort(caf::execution_unit* unit, uint64_t step) {
  if (mailbox_.put(NodeMailbox::Item::Kind::abort, 0, Tag{step, 0, 0}, Value{})) schedule(unit);
}

void NodeActor::post_call(caf::execution_unit* unit, NodeMailbox::Call&& call) {
  if (mailbox_.put(std::move(call))) schedule(unit);
}

void NodeActor::stop_fast_path(std::function<void()> done) {
  post_call(nullptr, [this, done = std::move(done)](bool) mutable {
    stopped_.store(true, std::memory_order_relaxed);
    stop_done_ = std::move(done);
  });
}

void NodeActor::finish_stop() {
  auto done = std::move(stop_done_);
  done();
}

void NodeActor::prefetch() const {
  // The node is claimed (on this thread's ready list): its fields change only in its turns, and
  // its plan, kernel and outputs' places not at all.
  __builtin_prefetch(&mailbox_);
  __builtin_prefetch(&plan_);
  __builtin_prefetch(me_);
  __builtin_prefetch(reinterpret_cast<const char*>(me_) + 64);
  __builtin_prefetch(kernel_.get());
  __builtin_prefetch(outputs_.data());
}

void NodeActor::prefetch_fields() const {
  // The hot fields, declared together from mailbox_ to aborted_next_ (node.hpp).
  const char* a = reinterpret_cast<const char*>(&mailbox_);
  const char* b = reinterpret_cast<const char*>(&aborted_next_);
  // From the line the first lies in (an actor is aligned to 16 bytes, not to a line) to that of
  // the last.
  const char* from = reinterpret_cast<const char*>(reinterpret_cast<uintptr_t>(std::min(a, b)) & ~uintptr_t(63));
  const char* to = std::min(std::max(a, b), from + (kHotFieldLines - 1) * 64);
  for (const char* p = from; p <= to; p += 64) __builtin_prefetch(p);
}

caf::execution_unit* NodeActor::unit() { return fast_ ? tls_unit : context(); }

void NodeActor::schedule(caf::execution_unit* unit) {
  if (tls_running) {
    // No reference is taken for the ready list: the node stays alive until it has been stopped
    // (its consumers' Targets and the plan hold its actor), and being claimed it is only stopped
    // in a turn, which must come from this list first.
    if (cheap_) {
      LocalReady& ready = local_ready();
      // While a spread loop's iterations wait here (pinned), a cheap node (the loop's counter
      // and condition, an iteration's end, which the next iterations wait for) goes to a
      // worker that has nothing to do, else first: run behind the kernels here, it would take
      // one step per kernel, and the other worker would wait for iterations. (Run here first
      // while the other waits, the loop's control stays with the worker that has iterations
      // queued, and that worker falls further behind.)
      if (ready.pinned > 0) [[unlikely]] {
        if (offer(tls_unit)) return;
        push_first(ready, this);
      } else if (side_ && cost_ >= kSideTicks && cost_ > move_ticks() && offer(tls_unit)) [[unlikely]] {
        // Work beside a loop's chain (NodePlan::side) that is worth a trip: the other worker
        // does it while the chain goes on here (run here, it ran before the next iteration).
        // Not when reading its inputs over there costs more than the node itself: the other
        // core reads them from this one's cache, and the blocks it frees there come back to
        // this core's next kernel cold.
        return;
      } else {
        ready.nodes.push_back(this);
      }
      ready.cost += cost_;
    } else if (!tls_expensive) {
      tls_expensive = this;
    } else {
      give_away(tls_unit);  // a second expensive node: for another thread to take
    }
    return;
  }
  enqueue_runner(unit);
}

void NodeActor::enqueue_runner(caf::execution_unit* unit) {
  hold_actor(ctrl());  // the job's, released by the worker after its turn
  if (unit) unit->exec_later(&runner_);
  else home_system().scheduler().enqueue(&runner_);
}

bool NodeActor::offer(caf::execution_unit* unit) {
  if (!unit || !ours(unit) || !SchedulingPolicy::someone_idle(unit)) return false;
  hold_actor(ctrl());  // the job's
  // A node that takes much longer than a wake-up may wake a sleeping worker.
  if (SchedulingPolicy::offer(unit, &runner_, /*wake=*/cost_ >= kWakeTicks)) return true;
  release_actor(ctrl());
  return false;
}

void NodeActor::give_away(caf::execution_unit* unit) {
  if (!offer(unit)) enqueue_runner(unit);
}

NodeActor::Drained NodeActor::drain() {
  // Where the outputs go (read after the kernel, a miss each in a large graph), on their way
  // meanwhile.
  for (const auto& targets : me_->outputs) __builtin_prefetch(targets.data());
  __builtin_prefetch(me_->control_outputs.data());
  LocalReady& ready = local_ready();
  // Asked once a turn: whether the node goes with its iteration (spreads_now() loads the
  // loop's shared counters).
  const bool spreading = spreads_ && spreads_now();
  tls_spread_turn = spreading;
  const std::size_t ready_before = ready.nodes.size();
  for (int round = 0; round < kDrainRounds; ++round) {
    if (!mailbox_.take(taken_, taken_calls_, defers_ ? deferral() : NodeMailbox::Deferral{})) return Drained::idle;
    // The inputs first, then the calls: a wait report (a call) counts the inputs that waited
    // in the mailbox (deferral()) as received.
    for (std::size_t i = 0; i < taken_.size(); ++i) {
      NodeMailbox::Item& item = taken_[i];
      // An input of another worker's iteration (spread()): the node goes there with the rest.
      if (spreading && item.kind == NodeMailbox::Item::Kind::input)
        if (const int to = iteration_worker(item.tag); std::size_t(to) != SchedulingPolicy::worker_index(tls_unit)) {
          mailbox_.put_back(taken_, i);
          if (!taken_calls_.empty() && run_calls()) return Drained::stopped;  // what was put back never runs
          send_to_worker(to);
          return Drained::moved;  // the other worker may run the node from here on
        }
      // What an expensive node's turn made ready goes to the scheduler before it fires again,
      // for another thread to take meanwhile, instead of waiting here behind that firing.
      if (!cheap_ && (tls_expensive || ready.nodes.size() > ready_before)) hand_over(ready_before);
      const std::size_t waiting = ready.nodes.size() - ready.head;
      handle(item);
      // A node that goes with its iteration takes one input in a turn that made a node ready
      // here (the next node of that iteration, put first: spread()); the rest wait behind it.
      // Each worker so takes its oldest iteration to its end before the next. (Taking every
      // input at once, it would run a stage at a time over all its iterations: they would all
      // end late, together, and the window of parallel_iterations, which waits for the oldest,
      // would drain.)
      if (spreading && i + 1 < taken_.size() && ready.nodes.size() - ready.head > waiting) {
        mailbox_.put_back(taken_, i + 1);
        if (!taken_calls_.empty() && run_calls()) return Drained::stopped;  // what was put back never runs
        return Drained::behind;
      }
    }
    taken_.clear();
    if (!taken_calls_.empty() && run_calls()) return Drained::stopped;
  }
  return Drained::more;
}

bool NodeActor::run_calls() {
  for (auto& call : taken_calls_) {
    try {
      call(stopped_.load(std::memory_order_relaxed));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "troupe: %s: %s\n", me_->where().c_str(), e.what());
    }
  }
  taken_calls_.clear();
  return stopped_.load(std::memory_order_relaxed);
}

NodeMailbox::Deferral NodeActor::deferral() const {
  const Pending* held = first_.used ? &first_ : nullptr;
  for (const auto& p : more_) {
    if (!p->used) continue;
    if (held) return {};  // inputs of two tags: each input claims the node
    held = p.get();
  }
  if (!held) return {.left = uint32_t(expected_), .tag = nullptr};
  return {.left = uint32_t(held->remaining), .tag = &held->tag};
}

void NodeActor::hand_over(std::size_t from) {
  LocalReady& ready = local_ready();
  std::size_t kept = std::max(from, ready.head);
  for (std::size_t i = kept; i < ready.nodes.size(); ++i) {
    NodeActor* node = ready.nodes[i];
    if (node->pinned_) {  // stays with its iteration's values
      ready.nodes[kept++] = node;
      continue;
    }
    ready.cost -= node->cost_;
    node->enqueue_runner(tls_unit);
  }
  ready.nodes.resize(kept);
  if (NodeActor* e = std::exchange(tls_expensive, nullptr)) e->enqueue_runner(tls_unit);
}

void NodeActor::handle(NodeMailbox::Item& item) {
  try {
    if (item.kind == NodeMailbox::Item::Kind::abort) on_abort(item.tag.step);
    else if (!is_aborted(item.tag.step)) on_input(item.tag, item.slot, item.value);
  } catch (const Error& e) {
    report_error(item.tag, e.code(), e.what());
  } catch (const std::exception& e) {
    report_error(item.tag, ErrorCode::internal, e.what());
  }
}

Job::resume_result ReadyBatch::resume(caf::execution_unit* unit, std::size_t) {
  OnFastPath here(unit);
  LocalReady& ready = local_ready();
  // Copied in, not swapped: the thread's list keeps its room (a swap would give it the
  // batch's few slots, to grow again, allocation by allocation, after every batch).
  ready.nodes.insert(ready.nodes.end(), nodes_.begin(), nodes_.end());
  for (NodeActor* node : nodes_) {
    ready.cost += node->ready_cost();
    ready.pinned += node->pinned_;
  }
  NodeActor::run_ready(unit);
  return done;
}

void NodeActor::end_turn(caf::execution_unit* unit) {
  // The expensive node made ready goes to a worker that has nothing to do, unless this worker
  // has nothing else queued and moving the node's inputs there costs more than what waits on
  // this thread's list before it: its inputs are in this core's cache (a loop's expensive node
  // handed to the idle worker every iteration would move the loop's chain from core to core,
  // and its state with it). Else it runs here if nothing cheap is waiting, or waits in this
  // worker's queue (where an idle worker may yet steal it).
  if (NodeActor* e = std::exchange(tls_expensive, nullptr)) {
    LocalReady& ready = local_ready();
    const bool stays =
        e->me_->in_loop && e->move_ticks() > ready.cost && ours(unit) && SchedulingPolicy::queued(unit) == 0;
    if (!stays && e->offer(unit)) return;
    if (ready.empty()) {
      ready.nodes.push_back(e);
      ready.cost += e->cost_;
    } else {
      e->enqueue_runner(unit);
    }
  }
}

void NodeActor::run_ready(caf::execution_unit* unit) {
  LocalReady& ready = local_ready();
  const bool can_offer = ours(unit);
  for (int ran = 0; !ready.empty(); ++ran) {
    // A spread loop's node handed to this worker (its queue), such as the first node of this
    // worker's next iteration, waits until the nodes on this list have run: run first, it
    // would take the rest of the list into a batch queued behind it, a heap object and two more
    // passes through the queue's mutex.
    if (ran == kInlineTurns) {
      // Enough in a row: the rest waits behind what this worker has queued (a step actor's
      // deadline, another step), as a job that used up its turn does.
      auto* rest = new ReadyBatch(std::vector<NodeActor*>(ready.nodes.begin() + std::ptrdiff_t(ready.head), ready.nodes.end()));
      if (can_offer) SchedulingPolicy::enqueue_later(unit, rest);
      else unit->exec_later(rest);
      ready.nodes.resize(ready.head);
      break;
    }
    // Half of what waits here goes to a worker that has nothing to do, when it is worth it.
    const std::size_t waiting = ready.nodes.size() - ready.head;
    if (waiting >= 2 && (ready.cost >= kOfferTicks || (waiting >= kOfferNodes && ready.cost >= kOfferNodesTicks)) &&
        can_offer && SchedulingPolicy::someone_idle(unit)) {
      // Pinned nodes (spread()) stay, moved before the half that goes.
      std::size_t first_free = ready.head;
      if (ready.pinned > 0)
        first_free = std::size_t(std::stable_partition(ready.nodes.begin() + std::ptrdiff_t(ready.head), ready.nodes.end(),
                                                       [](NodeActor* n) { return n->pinned_; }) -
                                 ready.nodes.begin());
      const std::size_t free = ready.nodes.size() - first_free;
      const std::size_t keep = first_free + (free + 1) / 2;
      if (keep < ready.nodes.size()) {
        auto* batch = new ReadyBatch(std::vector<NodeActor*>(ready.nodes.begin() + std::ptrdiff_t(keep), ready.nodes.end()));
        if (SchedulingPolicy::offer(unit, batch, /*wake=*/true)) {
          for (std::size_t i = keep; i < ready.nodes.size(); ++i) ready.cost -= ready.nodes[i]->cost_;
          ready.nodes.resize(keep);
        } else {
          batch->intrusive_ptr_release_impl();
        }
      }
    }
    NodeActor* node = ready.nodes[ready.head++];
    ready.cost -= node->ready_cost();
    if (std::exchange(node->pinned_, false)) --ready.pinned;
    // A step of a graph larger than the cache reaches each node after its lines were evicted,
    // each a miss of a few hundred cycles: the nodes that run next are fetched while this one
    // runs, in two stages, the node after next's own fields, then for the next node what those
    // fields point to (its plan, kernel and outputs).
    if (ready.head + 2 < ready.nodes.size()) ready.nodes[ready.head + 2]->prefetch_fields();
    if (!ready.empty()) ready.nodes[ready.head]->prefetch();
    switch (node->drain()) {
      case Drained::idle: break;
      case Drained::moved: break;
      case Drained::more: node->enqueue_runner(unit); break;
      case Drained::behind: node->pin_here(/*first=*/false); break;
      case Drained::stopped: node->finish_stop(); break;  // the last use of node
    }
    end_turn(unit);
  }
  ready.nodes.clear();
  ready.head = 0;
  ready.cost = 0;
  ready.pinned = 0;
}

Job::resume_result NodeRunner::resume(caf::execution_unit* unit, std::size_t) {
  OnFastPath here(unit);
  resume_result result = awaiting_message;
  using Drained = NodeActor::Drained;
  switch (node_->drain()) {
    case Drained::idle: break;
    case Drained::moved: break;  // this job's reference goes; the other worker's job has its own
    case Drained::more: result = resume_later; break;  // queued again, with the job's reference
    case Drained::behind: node_->pin_here(/*first=*/false); break;  // run_ready() runs it; the job's reference goes
    case Drained::stopped: node_->finish_stop(); break;  // the job's reference keeps it until we return
  }
  NodeActor::end_turn(unit);
  NodeActor::run_ready(unit);
  return result;
}

void NodeRunner::intrusive_ptr_add_ref_impl() { hold_actor(node_->ctrl()); }

void NodeRunner::intrusive_ptr_release_impl() { release_actor(node_->ctrl()); }

void NodeActor::on_exit() {
  // The plan is released with the actor object (see ~Executable), never here.
  release(first_);
  more_.clear();
  kernel_.reset();
}

namespace {
// What cleanup_latch_ holds once the actor's cleanup has run.
std::latch* cleaned_up_mark() {
  static std::latch mark{1};
  return &mark;
}
}  // namespace

void NodeActor::on_cleaned_up() {
  std::latch* latch = cleanup_latch_.exchange(cleaned_up_mark(), std::memory_order_acq_rel);
  if (latch && latch != cleaned_up_mark()) latch->count_down();
}

void NodeActor::count_down_at_cleanup(std::latch& latch) {
  if (cleanup_latch_.exchange(&latch, std::memory_order_acq_rel) == cleaned_up_mark()) latch.count_down();
}

namespace {
// A boolean scalar that is true (a LoopCond's value while its loop goes on).
bool says_true(const Tensor& t) { return t.dtype() == DType::boolean && t.num_elements() == 1 && *t.data<bool>(); }
}  // namespace

void NodeActor::prefetch_mailbox(const Target& t, int replica) {
  // The mailbox deliver() posts to. A consumer with replicas gets the input in the replica of
  // the iteration's worker; its own actor is replica 0, worker 0's: prefetched from worker 1,
  // its line would go to worker 1 at every firing there, and worker 0's next post to it would
  // miss. A producer that is not a replica would need the lookup deliver() makes (place()): no
  // prefetch.
  if (t.replicas) {
    if (replica >= 0) __builtin_prefetch(&t.replica(replica)->mailbox_);
  } else if (t.node) {
    __builtin_prefetch(&t.node->mailbox_);
  }
}

template <bool owned>
void NodeActor::send_outputs(const NodePlan& from, const Tag& tag, Tensor* outputs, bool dead,
                             uint64_t dead_outputs) {
  if constexpr (owned) dead = false;  // owned outputs are live (but for those in dead_outputs)
  caf::execution_unit* const u = unit();
  // A replica's consumers of the same iteration go to the replicas of its worker (deliver()).
  const int replica = from.replicas > 1 ? replica_ : -1;
  // The consumers' mailboxes, a few ahead of the one being sent to: their misses overlap.
  for (const auto& targets : from.outputs)
    for (std::size_t i = 0; i < std::min(targets.size(), kPrefetchAhead); ++i) prefetch_mailbox(targets[i], replica);
  for (std::size_t i = 0; i < std::min(from.control_outputs.size(), kPrefetchAhead); ++i)
    prefetch_mailbox(from.control_outputs[i], replica);
  for (std::size_t port = 0; port < from.outputs.size(); ++port) {
    const bool port_dead = dead || (port < 64 && (dead_outputs >> port) & 1);
    const auto& targets = from.outputs[port];
    for (std::size_t i = 0; i < targets.size(); ++i) {
      if (i + kPrefetchAhead < targets.size()) prefetch_mailbox(targets[i + kPrefetchAhead], replica);
      const Target& t = targets[i];
      if (port_dead) {
        if (!t.drop_dead) deliver(u, t, tag, t.slot, Value{Tensor(), true}, replica);
      } else if (t.drop_true && says_true(outputs[port])) [[unlikely]] {
        // An Exit's or a loop invariant's pred while the loop goes on: nothing for it to do
        // (Target::drop_true).
      } else if (owned && i + 1 == targets.size()) {
        deliver(u, t, tag, t.slot, Value{std::move(outputs[port]), false}, replica);  // the last consumer takes it
      } else {
        deliver(u, t, tag, t.slot, Value{outputs[port], false}, replica);
      }
    }
    if constexpr (owned) outputs[port].reset();
  }
  for (const Target& t : from.control_outputs) deliver(u, t, tag, kControlSlot, Value{Tensor(), dead}, replica);
}

void NodeActor::emit(const Tag& tag, Tensor* outputs, bool dead, uint64_t dead_outputs) {
  send_outputs<false>(*me_, tag, outputs, dead, dead_outputs);
}

void NodeActor::emit_owned(const Tag& tag, Tensor* outputs, uint64_t dead_outputs) {
  send_outputs<true>(*me_, tag, outputs, /*dead=*/false, dead_outputs);
}

void NodeActor::emit_for(const NodePlan& node, const Tag& tag, Tensor* outputs, bool dead) {
  send_outputs<false>(node, tag, outputs, dead, 0);
}

void NodeActor::emit_merged(const Tag& tag, Tensor&& value, uint32_t slot) {
  outputs_[0] = std::move(value);
  // Not a tensor made and freed at every firing for no reader: a Merge fires every iteration.
  if (!me_->outputs[1].empty()) outputs_[1] = Tensor::scalar<int32_t>(int32_t(slot));
  emit_owned(tag, outputs_.data());
}

void NodeActor::pass_input_on(const Tag& tag, Tensor* inputs, bool dead) {
  if (dead) {
    emit(tag, nullptr, true);
    return;
  }
  outputs_[0] = std::move(inputs[0]);
  emit_owned(tag, outputs_.data());
}

}  // namespace troupe
