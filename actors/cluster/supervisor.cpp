#include "actors/cluster/supervisor.hpp"
#include "actors/session_impl.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

#include "actors/cluster/master.hpp"
#include "actors/state/saver.hpp"
#include "core/report.hpp"
#include "core/device_name.hpp"

namespace troupe {

namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }

// The task ("ps:1") whose device's node failed the step (Error::device), if one did.
std::optional<std::string> failed_task(const Error& failed) {
  if (failed.device().empty()) return std::nullopt;
  const DeviceSpec device = DeviceSpec::parse(failed.device());
  if (!device.job || !device.task) return std::nullopt;
  return *device.job + ":" + std::to_string(*device.task);
}

// How long the recovery of a failed step may take, counted from its first failure.
struct RecoveryBound {
  bool chief;
  Clock::time_point deadline;
  double seconds;
};

// The tasks that run a new process since last seen, and where.
struct Restarted {
  std::vector<std::string> tasks, addresses;
};

}  // namespace

std::string Recovery::describe() const {
  std::string where;
  for (std::size_t i = 0; i < tasks.size(); ++i)
    where += fmt::format("{}{} (again at {}{})", i ? ", " : "", tasks[i], i < addresses.size() ? addresses[i] : "?",
                         i < spares.size() && !spares[i].empty() ? ", on " + spares[i] + ", which took it over" : "");
  std::string restored =
      checkpoint.empty()
          ? std::string("no variable restored here (the chief restores a restarted task's)")
          : fmt::format("{} variable(s) restored from {} (global step {}), the updates of {} global step(s) since lost",
                        variables, checkpoint, restored_step, lost_steps);
  return fmt::format("recovered from the loss of {}: {}; back after {:.2f} s, {}restepping after {:.2f} s (the step "
                     "failed with: {})",
                     where, restored, seconds_back,
                     checkpoint.empty() ? "" : fmt::format("restored after {:.2f} s, ", seconds_restored),
                     seconds_to_step, cause);
}

struct Supervisor::Impl {
  Session& session;
  Saver* saver;
  SupervisorOptions options;
  Master& master;
  std::map<std::string, uint64_t> incarnation;  // of every task, as last seen
  int64_t global_step = 0;
  std::optional<Clock::time_point> failing_since;  // the first failure of the step being retried
  std::optional<Recovery> pending;                 // reported once a step has run again
  std::vector<std::pair<std::string, std::string>> took_over;  // (task, spare) of the recovery under way
  std::vector<Recovery> done;

  // The replicas' watch (options.sync).
  std::thread watch;
  std::mutex watch_mutex;
  std::condition_variable watch_wakeup;
  bool watch_stopping = false;

  Impl(Session& s, Saver* sv, SupervisorOptions o)
      : session(s), saver(sv), options(std::move(o)), master(master_of(s)) {
    for (auto& t : master.task_workers()) incarnation[t.task] = t.incarnation;
  }
  void watch_replicas();
  bool finished(const SupervisorOptions::SyncReplicas& sync);
  double waited() const { return seconds_between(*failing_since, Clock::now()); }
  std::vector<Master::TaskWorker> reconnect_tasks(const Error& failed, const RecoveryBound& bound);
  Restarted find_restarted(const Error& failed, bool chief, const std::vector<Master::TaskWorker>& tasks);
  void wait_for_the_step(const Error& failed, const RecoveryBound& bound);
  std::optional<Recovery> restore_restarted(const Error& failed, const RecoveryBound& bound,
                                            const Restarted& restarted);
  void add_to_pending(Recovery r);
  void tell(const std::string& line) const {
    if (options.on_replicas) options.on_replicas(line);
    else report_to_stderr(line);
  }
  // A wait for lost tasks: told when it begins and every kWaitingNotice after.
  WaitNotice waiting;
  void tell_waiting(const std::string& who, const std::string& why, double waited, double bound) {
    if (!waiting.due()) return;
    const std::string line =
        waiting.first() ? fmt::format("waiting for {} (at most {:.1f} s){}", who, bound, why.empty() ? "" : ": " + why)
                        : fmt::format("still waiting for {} ({:.0f} s of at most {:.1f})", who, waited, bound);
    if (options.on_waiting) options.on_waiting(line);
    else report_to_stderr(line);
  }
  static Master& master_of(Session& s) {
    if (!cluster_master_of(s))
      fail(ErrorCode::invalid_argument, "Supervisor: the session runs in this process (no target): nothing to supervise");
    return *cluster_master_of(s);
  }
};

Supervisor::Supervisor(Session& session, Saver* saver, SupervisorOptions options)
    : impl_(std::make_unique<Impl>(session, saver, std::move(options))) {
  if (const auto& sync = impl_->options.sync) {
    if (sync->tasks.empty() || !sync->set_aggregate || !sync->aggregate || sync->replicas_to_aggregate < 1 ||
        sync->replicas_to_aggregate > int(sync->tasks.size()))
      fail(ErrorCode::invalid_argument,
           "Supervisor: the synchronous replicas need their tasks, 1 <= m <= tasks ({}, m {}) and the SyncTrainOp's "
           "aggregate and set_aggregate",
           sync->tasks.size(), sync->replicas_to_aggregate);
    if (sync->last_step > 0 && (!sync->global_step || !sync->stop))
      fail(ErrorCode::invalid_argument,
           "Supervisor: the synchronous replicas' last step ({}) needs the global step and the SyncTrainOp's stop",
           sync->last_step);
    for (auto& task : sync->tasks) (void)impl_->master.task_alive(task);  // throws for a task the cluster lacks
    impl_->watch = std::thread([im = impl_.get()] { im->watch_replicas(); });
  }
}

Supervisor::~Supervisor() { stop_watching_replicas(); }

void Supervisor::stop_watching_replicas() {
  Impl& im = *impl_;
  {
    std::lock_guard<std::mutex> lock(im.watch_mutex);
    im.watch_stopping = true;
  }
  im.watch_wakeup.notify_all();
  if (im.watch.joinable()) im.watch.join();
}

// Whether the job has reached its last global step (then replicas that leave have finished):
// if so, lets a step of this process that waits for their votes go on (SyncTrainOp::stop).
bool Supervisor::Impl::finished(const SupervisorOptions::SyncReplicas& sync) {
  if (sync.last_step <= 0) return false;
  try {
    if (session.run({sync.global_step})[0].scalar_value<int64_t>() < sync.last_step) return false;
    session.run({}, {}, {sync.stop});
    return true;
  } catch (const Error&) {
    return false;  // the global step's ps unreachable: the replicas' loss is handled as before
  }
}

void Supervisor::Impl::watch_replicas() {
  const SupervisorOptions::SyncReplicas& sync = *options.sync;
  const int m = sync.replicas_to_aggregate;
  int in_force = m;
  std::string failed_change;  // the last change that failed, told once
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(watch_mutex);
      if (watch_wakeup.wait_for(lock, std::chrono::milliseconds(250), [&] { return watch_stopping; })) return;
    }
    std::vector<std::string> lost;
    for (auto& task : sync.tasks)
      if (!master.task_alive(task)) lost.push_back(task);
    const int alive = int(sync.tasks.size() - lost.size());
    const int wanted = std::max(1, std::min(m, alive));
    if (wanted == in_force) continue;
    if (wanted < in_force && finished(sync)) return;
    try {
      session.run({{sync.aggregate, Tensor::scalar<int64_t>(wanted == m ? 0 : wanted)}}, {}, {sync.set_aggregate});
    } catch (const Error& e) {
      const std::string what = fmt::format("could not make synchronous steps complete with {} of {} gradients: {}",
                                           wanted, m, e.what());
      if (what != failed_change) tell(what);
      failed_change = what;
      continue;
    }
    failed_change.clear();
    if (wanted < m)
      tell(fmt::format("replica task(s) {} lost: synchronous steps now complete with the gradients of the {} replica(s) "
                       "alive instead of {}, until {} back",
                       fmt::join(lost, ", "), wanted, m, lost.size() == 1 ? "it is" : "they are"));
    else if (lost.empty())
      tell(fmt::format("every replica's task is back: synchronous steps complete with {} gradients again", m));
    else
      tell(fmt::format("{} replicas are alive again (task(s) {} still lost): synchronous steps complete with {} "
                       "gradients again",
                       alive, fmt::join(lost, ", "), m));
    in_force = wanted;
  }
}

void Supervisor::saw_global_step(int64_t step) { impl_->global_step = std::max(impl_->global_step, step); }

const std::vector<Recovery>& Supervisor::recoveries() const { return impl_->done; }

void Supervisor::succeeded() {
  Impl& im = *impl_;
  if (im.pending) {
    im.pending->seconds_to_step = seconds_between(*im.failing_since, Clock::now());
    im.done.push_back(std::move(*im.pending));
    im.pending.reset();
    if (im.options.on_recovery) im.options.on_recovery(im.done.back());
  }
  im.failing_since.reset();
}

void Supervisor::recover(const Error& failed) {
  try {
    try_to_recover(failed);
  } catch (...) {
    impl_->failing_since.reset();  // the next run() starts afresh
    impl_->pending.reset();
    throw;
  }
}

// Every task the steps run on reachable again (a lost one is reconnected, each try bounded)?
// Tasks no step of this session uses (another worker) are not waited for.
std::vector<Master::TaskWorker> Supervisor::Impl::reconnect_tasks(const Error& failed, const RecoveryBound& bound) {
  for (;;) {
    try {
      return master.task_workers(master.tasks_in_use());
    } catch (const Error& e) {
      // Not back within the grace period: the chief gives a lost ps task's shards to a spare
      // (the spec's "spare" job), restored below like a restarted process's.
      if (Clock::now() > bound.deadline && bound.chief) {
        if (auto moved = master.take_over_with_spare()) {
          took_over.push_back(*moved);
          continue;
        }
      }
      // The error names the task that did not come back first, then the step's failure.
      if (Clock::now() > bound.deadline)
        fail(ErrorCode::unavailable, "the job cannot go on: a lost task did not come back within {:.1f} s (waited {:.1f} s{}): "
             "{}; the step had failed with: {}", bound.seconds, waited(),
             bound.chief ? ", and no spare took it over" : "", e.what(), failed.what());
      // "task ps:1 at 127.0.0.1:2222: no cluster member answers ...": who, then why.
      const std::string what = e.what();
      const auto colon = what.find(": ");
      tell_waiting(what.substr(0, colon) + " to come back", colon == std::string::npos ? "" : what.substr(colon + 2),
                   waited(), bound.seconds);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
    }
  }
}

Restarted Supervisor::Impl::find_restarted(const Error& failed, bool chief,
                                           const std::vector<Master::TaskWorker>& tasks) {
  Restarted restarted;
  for (auto& t : tasks) {
    auto it = incarnation.find(t.task);
    if (it != incarnation.end() && it->second == t.incarnation) continue;
    restarted.tasks.push_back(t.task);
    restarted.addresses.push_back(t.address);
    incarnation[t.task] = t.incarnation;
  }
  if (restarted.tasks.empty() && chief && failed.code() == ErrorCode::failed_precondition) {
    // The same processes, yet a variable is not initialised: a task restarted while no supervisor
    // saw it (this chief was away): the task of the failed node's device (a VariableV2 there).
    if (const auto task = failed_task(failed))
      for (auto& t : tasks)
        if (t.task == *task) {
          restarted.tasks.push_back(t.task);
          restarted.addresses.push_back(t.address);
        }
  }
  return restarted;
}

void Supervisor::Impl::wait_for_the_step(const Error& failed, const RecoveryBound& bound) {
  // The same processes: a connection lost for a moment (run the step again), or, in a worker,
  // variables the chief is still restoring. Otherwise the error is the program's own.
  if (failed.code() == ErrorCode::failed_precondition && (bound.chief || (done.empty() && !pending)))
    throw failed;
  if (Clock::now() > bound.deadline)
    fail(failed.code(), "{}; the job could not go on within {:.1f} s (waited for at most {:.0f} s{})", failed.what(),
         waited(), bound.seconds, bound.chief ? "" : " for the chief to restore the variables");
  if (!bound.chief && failed.code() == ErrorCode::failed_precondition)
    tell_waiting("the chief to restore the variables of a restarted task", "", waited(), bound.seconds);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

// nullopt when a task was lost again while its variables were restored (tried again next time).
std::optional<Recovery> Supervisor::Impl::restore_restarted(const Error& failed, const RecoveryBound& bound,
                                                            const Restarted& restarted) {
  const bool chief = bound.chief;
  Recovery r;
  r.tasks = restarted.tasks;
  r.addresses = restarted.addresses;
  for (auto& task : restarted.tasks) {
    r.spares.emplace_back();
    for (auto& [moved, spare] : took_over)
      if (moved == task) r.spares.back() = spare;
  }
  took_over.clear();
  r.cause = failed.what();
  r.seconds_back = seconds_between(*failing_since, Clock::now());
  auto latest = chief && !options.checkpoint_dir.empty() ? latest_checkpoint(options.checkpoint_dir) : std::nullopt;
  // No checkpoint yet: fatal only where a variable is missing. A restarted task that holds none
  // (a worker that rejoined) needs nothing, and the step run again says which is the case.
  if (chief && !latest && failed.code() == ErrorCode::failed_precondition)
    fail(ErrorCode::data_loss, "task(s) {} run a new process and their variables are lost, with {} to restore them "
         "from; the step had failed with: {}", fmt::join(restarted.tasks, ", "),
         options.checkpoint_dir.empty() ? std::string("no checkpoint directory (the chief saves none)")
                                        : fmt::format("no checkpoint in '{}'", options.checkpoint_dir),
         failed.what());
  if (latest) {
    RestoreReport report;
    try {
      report = saver->restore_tasks(*latest, restarted.tasks);
    } catch (const Error& e) {
      // Lost again while restoring: seen as restarted next time, and tried again (bounded).
      if (e.code() != ErrorCode::unavailable || Clock::now() > bound.deadline) throw;
      for (auto& t : restarted.tasks) incarnation.erase(t);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return std::nullopt;
    }
    r.checkpoint = report.path;
    r.restored_step = report.global_step;
    r.lost_steps = std::max<int64_t>(0, global_step - report.global_step);
    r.variables = report.restored.size();
    r.seconds_restored = seconds_between(*failing_since, Clock::now());
  }
  return r;
}

void Supervisor::Impl::add_to_pending(Recovery r) {
  if (pending) {  // a second loss before a step ran again: one report of both
    for (std::size_t i = 0; i < r.tasks.size(); ++i) {
      pending->tasks.push_back(r.tasks[i]);
      pending->addresses.push_back(r.addresses[i]);
      pending->spares.push_back(r.spares[i]);
    }
    if (!r.checkpoint.empty()) {
      pending->checkpoint = r.checkpoint;
      pending->restored_step = r.restored_step;
      pending->lost_steps = std::max(pending->lost_steps, r.lost_steps);
      pending->variables += r.variables;
      pending->seconds_restored = r.seconds_restored;
    }
  } else {
    pending = std::move(r);
  }
}

void Supervisor::try_to_recover(const Error& failed) {
  Impl& im = *impl_;
  if (failed.code() != ErrorCode::unavailable && failed.code() != ErrorCode::failed_precondition) throw failed;
  const auto now = Clock::now();
  if (!im.failing_since) {
    im.failing_since = now;
    im.waiting.reset();
  }
  const bool chief = im.saver != nullptr;
  // A worker also waits for the chief's restore after the task is back.
  // (and, should the task not come back, for the chief to give it to a spare and restore it there)
  const auto bound = chief ? im.options.grace : 2 * im.options.grace + std::chrono::seconds(10);
  const RecoveryBound within{chief, *im.failing_since + bound, std::chrono::duration<double>(bound).count()};

  const std::vector<Master::TaskWorker> tasks = im.reconnect_tasks(failed, within);
  const Restarted restarted = im.find_restarted(failed, chief, tasks);
  if (restarted.tasks.empty()) {
    im.wait_for_the_step(failed, within);
    return;
  }
  if (auto r = im.restore_restarted(failed, within, restarted)) im.add_to_pending(std::move(*r));
}

}  // namespace troupe
