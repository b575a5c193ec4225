#pragma once
// Troupe's scheduling policy for CAF's worker threads: work stealing tuned for many tiny node
// actors. Each worker has a deque under its own mutex. A worker runs the actors it woke first
// (LIFO, for locality: the consumer of a value runs where the value is hot in cache). An idle
// worker steals the oldest job of another worker (never one handed to that worker in
// particular, send_to), with try_lock only, so a thief never makes
// the owner wait, and only from a worker with more than one job queued, or with one job that
// has waited behind the owner's current job for kStaleRounds of the thief's spin (a long
// kernel would otherwise hold up the next stage of a pipeline, such as the next iteration of a
// loop). A worker that wakes a
// job while others sleep wakes one of them (poked: it wakes to steal). Idle workers spin
// briefly (yielding), then sleep, waking every millisecond for a spin without yields.
//
// Installed as the actor system's scheduler module by Runtime (CAF uses a scheduler module
// supplied through the config's module factories instead of its own).
#include "actors/caf_internals.hpp"

#include <atomic>
#include <chrono>
#include <vector>
#include <condition_variable>
#include <deque>
#include <mutex>

namespace troupe {

class SchedulingPolicy : public SchedulerPolicyBase {
 public:
  struct coordinator_data {
    explicit coordinator_data(SchedulerParent*) {}
    std::atomic<std::size_t> next_worker{0};
    std::atomic<int> sleeping{0};
    std::atomic<int> idle{0};  // workers that found no job in their last look (spinning or asleep)
  };

  struct worker_data {
    explicit worker_data(SchedulerParent*) {}
    worker_data(const worker_data&) {}
    // Guards queue and the changes of asleep (size and asleep may be peeked at without it). A
    // worker blocks only on its own; another worker's it takes with try_lock (steals,
    // wake_one_other), and never while holding its own, so no two are ever held waiting on each
    // other.
    std::mutex mutex;
    std::deque<Job*> queue;
    std::atomic<std::size_t> size{0};
    std::condition_variable wake;
    std::atomic<bool> asleep{false};  // written under the mutex
    bool poked = false;  // woken by another worker: there is work to steal
    std::atomic<uint64_t> started{0};  // jobs this worker has begun; written by it alone
    std::atomic<bool> idle{false};     // counted in coordinator_data::idle
  };

  using OurWorker = SchedulerWorker<SchedulingPolicy>;

  // Whether any worker of the scheduler `unit` belongs to looks for work (one relaxed load).
  // `unit` must be a worker of this policy's.
  static bool someone_idle(caf::execution_unit* unit) {
    return d(static_cast<OurWorker*>(unit)->parent()).idle.load(std::memory_order_relaxed) > 0;
  }

  // Queues `job` behind everything `unit` (a worker of this policy's) has queued, as a job that
  // has used up its turn is: what waits there runs first.
  static void enqueue_later(caf::execution_unit* unit, Job* job) {
    push(static_cast<OurWorker*>(unit), job, false);
  }

  // Hands `job` to a worker other than `unit` (a worker of this policy's) that looks for work;
  // false, and nothing done, when none does. A sleeping worker is woken for it only if `wake`:
  // the wake-up takes longer than a small job saves.
  static bool offer(caf::execution_unit* unit, Job* job, bool wake = false) {
    auto* self = static_cast<OurWorker*>(unit);
    auto* parent = self->parent();
    const std::size_t n = parent->num_workers();
    for (std::size_t i = 1; i < n; ++i) {
      auto* w = parent->worker_by_id((self->id() + i) % n);
      auto& other = d(w);
      if (!other.idle.load(std::memory_order_relaxed)) continue;
      if (!wake && other.asleep.load(std::memory_order_relaxed)) continue;
      hand(other, job);
      return true;
    }
    return false;
  }

  // Which worker `unit` (a worker of this policy's) is, and how many its scheduler has.
  static std::size_t worker_index(caf::execution_unit* unit) { return static_cast<OurWorker*>(unit)->id(); }
  static std::size_t worker_count(caf::execution_unit* unit) {
    return static_cast<OurWorker*>(unit)->parent()->num_workers();
  }

  // How many jobs wait in `unit`'s queue (a worker of this policy's; one relaxed load).
  static std::size_t queued(caf::execution_unit* unit) {
    return d(static_cast<OurWorker*>(unit)).size.load(std::memory_order_relaxed);
  }

  // Queues `job` at worker `index` of the scheduler of `unit` (a worker of this policy's),
  // waking it if it sleeps. The job is that worker's: no other worker steals it (a spread
  // loop's node sent to its iteration's worker, which a thief would only send back, each time
  // through the node's mailbox and both queues' locks).
  static void send_to(caf::execution_unit* unit, std::size_t index, Job* job) {
    hand(d(static_cast<OurWorker*>(unit)->parent()->worker_by_id(index)), job, /*own=*/true);
  }

  template <class Coordinator>
  void central_enqueue(Coordinator* self, Job* job) {
    auto n = self->num_workers();
    auto* w = self->worker_by_id(d(self).next_worker++ % n);
    w->external_enqueue(job);
  }

  template <class Worker>
  void external_enqueue(Worker* self, Job* job) {
    push(self, job, false);
    wake(self);
  }

  template <class Worker>
  void internal_enqueue(Worker* self, Job* job) {
    push(self, job, true);
    auto* parent = self->parent();
    if (d(parent).sleeping.load(std::memory_order_relaxed) > 0 &&
        d(self).size.load(std::memory_order_relaxed) > 1)
      wake_one_other(self);
  }

  template <class Worker>
  void resume_job_later(Worker* self, Job* job) {
    push(self, job, false);
  }

  // CAF's worker loop notes each job's actor id in the logger's table, under one process-wide
  // spin lock, twice a job (CAF_PUSH_AID) while the thread has a current logger: the worker's
  // start makes the system's logger current, and so does every spawn on the thread. A CAF
  // built to log nothing (Debian's) never reads the table, yet the job's turn waits for that
  // lock's line whenever another worker holds it. No current logger, no lock.
  static void forget_logger() {
    if (caf::logger::current_logger()) caf::logger::set_current_actor_system(nullptr);
  }

  template <class Worker>
  Job* dequeue(Worker* self) {
    bool counted = false;  // this worker is counted in coordinator_data::idle
    // Yields only in the spin right after work or a wake-up: a worker whose sleep timed out
    // spins through the queues again without yielding (microseconds), then sleeps again. A
    // yield is a trip through the kernel's scheduler: an idle process whose workers yielded
    // after every timed-out sleep would take CPU from the busy processes beside it.
    auto& looking = d(self).idle;
    for (bool slept = false;;) {
      for (int round = 0; round < kSpinRounds; ++round) {
        Job* job = pop_own(self);
        if (!job) job = steal(self);
        if (job) {
          if (looking.load(std::memory_order_relaxed)) {
            looking.store(false, std::memory_order_relaxed);
          }
          if (counted) {
            d(self->parent()).idle.fetch_sub(1, std::memory_order_relaxed);
            counted = false;
          }
          auto& started = d(self).started;
          started.store(started.load(std::memory_order_relaxed) + 1, std::memory_order_relaxed);
          forget_logger();
          return job;
        }
        if (!counted) {
          d(self->parent()).idle.fetch_add(1, std::memory_order_relaxed);
          counted = true;
        }
        if (!looking.load(std::memory_order_relaxed)) looking.store(true, std::memory_order_relaxed);
        if (!slept && round > kSpinRounds / 2) std::this_thread::yield();
      }
      auto& me = d(self);
      auto& shared = d(self->parent());
      std::unique_lock<std::mutex> lock(me.mutex);
      if (!me.queue.empty()) {
        slept = false;
        continue;
      }
      me.asleep = true;
      shared.sleeping.fetch_add(1, std::memory_order_relaxed);
      // Timed: a job stealable elsewhere does not wake us unless its owner sees us asleep.
      slept = !me.wake.wait_for(lock, std::chrono::milliseconds(1), [&] { return !me.queue.empty() || me.poked; });
      me.poked = false;
      shared.sleeping.fetch_sub(1, std::memory_order_relaxed);
      me.asleep = false;
    }
  }

  template <class Worker, class UnaryFunction>
  void foreach_resumable(Worker* self, UnaryFunction f) {
    auto& me = d(self);
    std::deque<Job*> jobs;
    {
      std::lock_guard<std::mutex> lock(me.mutex);
      jobs.swap(me.queue);
      me.size = 0;
    }
    for (auto* job : jobs) f(unmark(job));
  }

  template <class Coordinator, class UnaryFunction>
  void foreach_central_resumable(Coordinator*, UnaryFunction) {}

 private:
  static constexpr int kSpinRounds = 256;

  // A job in a queue that only its worker may run (send_to) is marked by the pointer's low bit
  // (a resumable is aligned to more than a byte).
  static Job* mark_own(Job* job) {
    return reinterpret_cast<Job*>(reinterpret_cast<uintptr_t>(job) | 1);
  }
  static bool is_own(Job* job) { return reinterpret_cast<uintptr_t>(job) & 1; }
  static Job* unmark(Job* job) {
    return reinterpret_cast<Job*>(reinterpret_cast<uintptr_t>(job) & ~uintptr_t(1));
  }

  // Queues `job` at the back of another worker's queue, waking it if it sleeps; `own`: only
  // that worker may run it.
  static void hand(worker_data& other, Job* job, bool own = false) {
    std::lock_guard<std::mutex> lock(other.mutex);
    other.queue.push_back(own ? mark_own(job) : job);
    other.size.store(other.queue.size(), std::memory_order_relaxed);
    other.idle.store(false, std::memory_order_relaxed);  // one offer per look; it clears it itself too
    if (other.asleep) {
      other.poked = true;
      other.wake.notify_one();
    }
  }

  template <class Worker>
  static void push(Worker* self, Job* job, bool front) {
    auto& me = d(self);
    std::lock_guard<std::mutex> lock(me.mutex);
    if (front) me.queue.push_front(job);
    else me.queue.push_back(job);
    me.size.store(me.queue.size(), std::memory_order_relaxed);
  }

  template <class Worker>
  static void wake(Worker* self) {
    auto& me = d(self);
    std::lock_guard<std::mutex> lock(me.mutex);
    if (me.asleep) me.wake.notify_one();
  }

  template <class Worker>
  static void wake_one_other(Worker* self) {
    auto* parent = self->parent();
    auto n = parent->num_workers();
    for (std::size_t i = 1; i < n; ++i) {
      auto* w = parent->worker_by_id((self->id() + i) % n);
      auto& other = d(w);
      std::unique_lock<std::mutex> lock(other.mutex, std::try_to_lock);
      if (lock.owns_lock() && other.asleep) {
        other.poked = true;
        other.wake.notify_one();
        return;
      }
    }
  }

  template <class Worker>
  static Job* pop_own(Worker* self) {
    auto& me = d(self);
    if (me.size.load(std::memory_order_relaxed) == 0) return nullptr;
    std::lock_guard<std::mutex> lock(me.mutex);
    if (me.queue.empty()) return nullptr;
    auto* job = unmark(me.queue.front());
    me.queue.pop_front();
    me.size.store(me.queue.size(), std::memory_order_relaxed);
    return job;
  }

  // Rounds of a thief's spin (each a look at every queue, the later ones after a yield) that a
  // victim's lone job may wait behind the same running job before the thief takes it.
  static constexpr int kStaleRounds = 64;

  template <class Worker>
  static Job* steal(Worker* self) {
    auto* parent = self->parent();
    auto n = parent->num_workers();
    // Per victim: its job count when this thief first saw it holding one queued job, and how
    // many times it has seen the same since.
    struct Seen {
      uint64_t started = ~uint64_t(0);
      int rounds = 0;
    };
    thread_local std::vector<Seen> seen;
    if (seen.size() < n) seen.resize(n);
    for (std::size_t i = 1; i < n; ++i) {
      std::size_t v = (self->id() + i) % n;
      auto& victim = d(parent->worker_by_id(v));
      std::size_t queued = victim.size.load(std::memory_order_relaxed);
      if (queued == 0) continue;
      std::size_t least = 2;
      if (queued == 1) {
        uint64_t started = victim.started.load(std::memory_order_relaxed);
        if (seen[v].started != started) {
          seen[v] = {started, 0};
          continue;
        }
        if (++seen[v].rounds < kStaleRounds) continue;
        least = 1;  // the owner has been busy with one job all this time
      }
      std::unique_lock<std::mutex> lock(victim.mutex, std::try_to_lock);
      if (!lock.owns_lock() || victim.queue.size() < least) continue;
      // The oldest job that is not the victim's own (send_to).
      auto it = victim.queue.end();
      while (it != victim.queue.begin() && is_own(*(it - 1))) --it;
      if (it == victim.queue.begin()) continue;
      auto* job = *(it - 1);
      victim.queue.erase(it - 1);
      victim.size.store(victim.queue.size(), std::memory_order_relaxed);
      return job;
    }
    return nullptr;
  }
};

// The module factory that installs a coordinator with this policy.
caf::actor_system::module* make_scheduler(caf::actor_system& system);

}  // namespace troupe
