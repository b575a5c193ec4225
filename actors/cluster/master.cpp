#include "actors/cluster/master.hpp"

#include <caf/io/all.hpp>

#include <atomic>
#include <condition_variable>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <unistd.h>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/cluster_spec.hpp"
#include "actors/cluster/worker.hpp"
#include "actors/executor/executable.hpp"
#include "actors/signature.hpp"
#include "actors/timeouts.hpp"
#include "actors/trace/wait_chain.hpp"
#include "core/thread_annotations.hpp"
#include "core/report.hpp"
#include "core/device_name.hpp"
#include "graph/graph_def.hpp"
#include "core/trace.hpp"
#include "graph/partition.hpp"

namespace troupe {
namespace {

uint64_t random_id() {
  static std::mutex mutex;
  static std::mt19937_64 engine{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mutex);
  uint64_t id = engine();
  return id == 0 ? 1 : id;
}

// The master's own actor system with the network layer (apart from the process's Runtime).
struct MasterSystem {
  caf::actor_system_config config;
  std::unique_ptr<caf::actor_system> system;
  TlsFiles tls;
  explicit MasterSystem(const NetworkOptions& network) : tls(network.tls) {
    configure_network(config, network);
    config.set("scheduler.max-threads", 2);
    apply_caf_options_from_environment(config);
    system = std::make_unique<caf::actor_system>(config);
  }
};

TaskAddress parse_target(const std::string& target) {
  const std::string scheme = "troupe://";
  if (target.rfind(scheme, 0) != 0)
    fail(ErrorCode::invalid_argument, "session target '{}' is not of the form troupe://host:port", target);
  return parse_task_address(target.substr(scheme.size()), "session target '" + target + "'");
}

// What the master knows of one task.
struct TaskLink {
  TaskId id;
  TaskAddress address;
  WorkerActor worker;
  caf::actor inbox;
  uint64_t incarnation = 0;
  std::vector<std::string> devices;
  std::string lost;  // why it is unreachable; empty while connected
  // The task's clock (core/trace.hpp's now_ns) minus the master's, and how far off that can be:
  // half the round trip of the fastest of a few pings at connection.
  int64_t clock_offset = 0, clock_error = -1;
  bool retired = false;  // a spare that took over another task: no task of its own any more
  // A spare that now is `task`: never connected or placed on as itself again.
  void retire(const std::string& task) {
    retired = true;
    devices.clear();
    lost = fmt::format("it took over {}", task);
  }
};

struct Links {
  mutable std::mutex mutex;  // guards tasks' workers, incarnations and lost causes
  std::vector<TaskLink> tasks;
};

// Monitors every task's worker; a loss is written down for the next step to see.
struct OwnerState {
  std::shared_ptr<Links> links;
  static inline const char* name = "troupe.master";
};

caf::behavior owner_actor(caf::stateful_actor<OwnerState>* self, std::shared_ptr<Links> links) {
  self->state.links = std::move(links);
  self->set_down_handler([self](caf::down_msg& dm) {
    auto& links = *self->state.links;
    std::lock_guard<std::mutex> lock(links.mutex);
    for (auto& t : links.tasks)
      if (t.worker && t.worker.address() == dm.source && t.lost.empty())
        t.lost = fmt::format("its connection was lost ({})", self->system().render(dm.reason));
  });
  return {[self](const caf::actor& worker) { self->monitor(worker); }};
}

// Which of `workers` (one per share of a signature) `a` is; -1 for none.
int index_of(const std::vector<WorkerActor>& workers, const caf::actor_addr& a) {
  for (std::size_t i = 0; i < workers.size(); ++i)
    if (workers[i].address() == a) return int(i);
  return -1;
}

std::vector<std::string> split_devices(const std::string& joined) {
  std::vector<std::string> out;
  std::size_t start = 0;
  while (start < joined.size()) {
    auto end = joined.find(',', start);
    if (end == std::string::npos) end = joined.size();
    if (end > start) out.push_back(joined.substr(start, end - start));
    start = end + 1;
  }
  return out;
}

}  // namespace

struct Master::Signature {
  struct Share {
    int task = 0;  // index into the links
    std::vector<int> fetch_index;  // per local fetch: the signature's fetch
    std::vector<int> feed_index;   // per local feed: the signature's feed
    RegisterGraph request;
    uint64_t incarnation = 0;  // of the task it was registered with
    std::vector<std::string> edges_from;  // values other tasks wait for from it, described
  };
  // Re-registration (make_current) talks to the tasks, so it runs with no lock held: the mutex
  // only hands out the right to do it (`registering`). The thread that holds that right alone
  // writes the shares' requests and incarnations; `handle` is read by anyone at any time.
  std::mutex mutex;
  std::condition_variable registered;  // `registering` went false
  bool registering TROUPE_GUARDED_BY(mutex) = false;
  std::atomic<uint64_t> handle{0};
  // A task said it cannot run its share (it lost a peer): register anew before the next step.
  std::atomic<bool> stale{false};
  std::vector<Share> shares;
  int num_fetches = 0;
};

// Lock order. No lock of the master is held while a task is asked anything: every mutex is a
// leaf, held for a few field reads or writes and with no other lock: links->mutex,
// signatures_mutex, running_mutex, connect_mutex and each Signature::mutex. The last two only
// hand out a right, each to one thread at a time, that is then used with no lock held: to
// connect (ConnectTurn: CAF drops both of two connections to the same node) and to re-register a
// signature (current_handle). A thread waiting for either waits on a condition variable, not on a
// lock held across the tasks' answers.
struct Master::Impl {
  MasterOptions options;
  std::shared_ptr<MasterSystem> sys;
  std::shared_ptr<Links> links = std::make_shared<Links>();
  caf::actor owner;
  std::string owner_name;
  int target_task = 0;
  std::vector<std::string> target_agreement;  // the target member's spec as it started

  mutable std::mutex signatures_mutex;
  std::vector<std::shared_ptr<Signature>> signatures;  // deregistered when the master goes

  std::mutex running_mutex;
  std::map<uint64_t, Signature*> running;  // the steps in run(), for describe_running

  caf::actor_system& system() { return *sys->system; }
  std::chrono::milliseconds connect_bound() const { return timeouts::member_connect(options.network.connection_timeout); }

  // Connects to task `i` and asks who it is; throws unavailable naming it ("task ps:0 at
  // 127.0.0.1:2222: ...").
  void connect(int i);
  void connect_unnamed(int i);  // connect()'s work; its errors name no task
  TaskAddress current_address(int i);
  // The right to connect, one thread at a time (ConnectTurn).
  std::mutex connect_mutex;
  std::condition_variable connect_free;  // `connecting` went false
  bool connecting TROUPE_GUARDED_BY(connect_mutex) = false;
  class ConnectTurn;
  // connect_unnamed()'s steps: the worker of task `i` reached (at the address a spare that took
  // it over has, if not at its own), its identity and inbox (a spare's retired: false), the spec
  // check, and the offset of its clock.
  WorkerActor reach(int i);
  bool identify(int i, const WorkerActor& worker, caf::scoped_actor& self, TaskLink& into);
  void check_agreement(int i, const WorkerActor& worker, caf::scoped_actor& self);
  std::pair<int64_t, int64_t> clock_offset(const WorkerActor& worker, caf::scoped_actor& self);
  // prepare()'s steps: every task's devices to place on, the target's first (`task_of`: device ->
  // task); the registration of the share of `placed` in partitions `parts`, on task `task`; and
  // the values between tasks: who exchanges with whom, which cross as float16, and what a task's
  // loss leaves waiting (`share_of`: task -> its share in `sig`).
  SignaturePlacement placement(std::map<std::string, int>& task_of);
  Signature::Share share_for(const PlacedSignature& placed, int task, const std::vector<int>& parts);
  void note_transfers(Signature& sig, const Partitions& cut, const std::map<std::string, int>& task_of,
                      const std::map<int, int>& share_of);
  void register_signature(Signature& sig);
  void deregister(const Signature& sig, uint64_t handle);
  // `sig`'s registration handle once it is current (make_current), made current by this thread
  // or by the one already doing it, without holding a lock while the tasks are asked.
  uint64_t current_handle(Signature& sig);
  // Reconnects lost tasks of `sig` and registers it anew where a task has a new incarnation.
  // Only with the right to register (current_handle).
  void make_current(Signature& sig);
  std::vector<WorkerActor> workers_of(const Signature& sig) {
    std::lock_guard<std::mutex> lock(links->mutex);
    std::vector<WorkerActor> out;
    for (auto& share : sig.shares) out.push_back(links->tasks[std::size_t(share.task)].worker);
    return out;
  }
  // What step `step` of registration `handle` waits for on the tasks of `sig` marked in `ask`
  // (`workers` per share; all asked at once, each answer awaited for a bounded time): the stuck
  // nodes followed across tasks ("stuck: worker:0 'x' waits for 'y:0' from ps:0, where ..."),
  // then per task its waiting nodes, a line each; empty when no task says anything waits.
  std::string explain_step(const Signature& sig, uint64_t handle, uint64_t step,
                           const std::vector<WorkerActor>& workers, const std::vector<bool>& ask);
  // Step `step`'s answers from `workers` (monitored, each sent its share), the fetches put in
  // `result`, until all are in, one fails or is lost, or `deadline` (0: none) passes: the failure.
  std::optional<StepResult> await_shares(Signature& sig, uint64_t handle, uint64_t step, caf::scoped_actor& self,
                                         const std::vector<WorkerActor>& workers, std::chrono::milliseconds deadline,
                                         StepResult& result);
  // The step's failure when the task of `share` is lost (`dm`); marks the task lost.
  StepResult share_lost(const Signature::Share& share, uint64_t step, const caf::down_msg& dm);
  // The step's failure past its deadline, with what the shares not `answered` wait for.
  StepResult step_overdue(const Signature& sig, uint64_t handle, uint64_t step, const std::vector<WorkerActor>& workers,
                          const std::vector<bool>& answered, std::chrono::milliseconds deadline);
  std::string describe(int task) const {
    const auto& t = links->tasks[std::size_t(task)];
    return fmt::format("task {} at {}", t.id.to_string(), t.address.to_string());
  }
};

// Where the cluster says task `i` runs now: a spare may have taken it over, and the members then
// running were told (a member started since was not). The target member is asked first, then
// every other one connected, each within the connect bound; the first other address wins. The
// address as it was when none knows another.
TaskAddress Master::Impl::current_address(int i) {
  const TaskLink& t = links->tasks[std::size_t(i)];
  const std::string name = t.id.to_string();
  std::vector<WorkerActor> ask;
  {
    std::lock_guard<std::mutex> lock(links->mutex);
    const TaskLink& target = links->tasks[std::size_t(target_task)];
    if (target.worker && target.lost.empty()) ask.push_back(target.worker);
    for (auto& other : links->tasks)
      if (&other != &t && &other != &target && !other.retired && other.worker && other.lost.empty())
        ask.push_back(other.worker);
  }
  caf::scoped_actor self{system()};
  for (auto& member : ask) {
    TaskAddress said = t.address;
    self->request(member, caf::duration{connect_bound()}, spec_atom::value)
        .receive(
            [&](std::vector<std::string>& tasks, std::vector<std::string>& addresses) {
              for (std::size_t k = 0; k < tasks.size() && k < addresses.size(); ++k)
                if (tasks[k] == name) said = parse_task_address(addresses[k], "the cluster spec");
            },
            [](caf::error&) {});
    if (!(said == t.address)) return said;
  }
  return t.address;
}

void Master::Impl::connect(int i) {
  try {
    connect_unnamed(i);
  } catch (const Error& e) {
    std::string who;
    {
      std::lock_guard<std::mutex> lock(links->mutex);
      who = describe(i);
    }
    throw Error(e.code(), fmt::format("{}: {}", who, e.what()));
  }
}

// The right to connect, held from construction to destruction, waited for as long as another
// thread connects (each connect is bounded).
class Master::Impl::ConnectTurn {
 public:
  explicit ConnectTurn(Impl& im) : im_(im) {
    std::unique_lock<std::mutex> lock(im_.connect_mutex);
    im_.connect_free.wait(lock, [&] { return !im_.connecting; });
    im_.connecting = true;
  }
  ~ConnectTurn() {
    {
      std::lock_guard<std::mutex> lock(im_.connect_mutex);
      im_.connecting = false;
    }
    im_.connect_free.notify_one();
  }
  ConnectTurn(const ConnectTurn&) = delete;
  ConnectTurn& operator=(const ConnectTurn&) = delete;

 private:
  Impl& im_;
};

WorkerActor Master::Impl::reach(int i) {
  TaskLink& t = links->tasks[std::size_t(i)];
  try {
    return connect_member(system(), t.address, connect_bound());
  } catch (const Error&) {
    const TaskAddress now = current_address(i);
    if (now == t.address) throw;
    {
      std::lock_guard<std::mutex> lock(links->mutex);
      t.address = now;  // taken over by a spare
    }
    return connect_member(system(), t.address, connect_bound());
  }
}

bool Master::Impl::identify(int i, const WorkerActor& worker, caf::scoped_actor& self, TaskLink& into) {
  TaskLink& t = links->tasks[std::size_t(i)];
  std::string task, devices;
  self->request(worker, caf::duration{connect_bound()}, identify_atom::value)
      .receive(
          [&](std::string& who, uint64_t inc, std::string& devs) {
            task = std::move(who);
            into.incarnation = inc;
            devices = std::move(devs);
          },
          [&](caf::error& e) {
            fail(ErrorCode::unavailable, "it did not say who it is within {} ms: {}", connect_bound().count(),
                 system().render(e));
          });
  self->request(worker, caf::duration{connect_bound()}, inbox_atom::value)
      .receive([&](caf::actor& a) { into.inbox = std::move(a); },
               [&](caf::error& e) {
                 fail(ErrorCode::unavailable, "it did not name its inbox within {} ms: {}", connect_bound().count(),
                      system().render(e));
               });
  into.devices = split_devices(devices);
  if (task == t.id.to_string()) return true;
  if (t.id.job == "spare") {  // it took that task over: no task of its own any more
    std::lock_guard<std::mutex> lock(links->mutex);
    t.retire(task);
    return false;
  }
  fail(ErrorCode::failed_precondition, "the member listening there says it is task {}: the cluster specs differ",
       task);
}

// Every member must have started from the same spec as the target (hosts whose copies differ
// would otherwise wait on addresses nobody listens on).
void Master::Impl::check_agreement(int i, const WorkerActor& worker, caf::scoped_actor& self) {
  if (i == target_task || target_agreement.empty()) return;
  std::vector<std::string> agreement;
  self->request(worker, caf::duration{connect_bound()}, agreement_atom::value)
      .receive([&](std::vector<std::string>& a) { agreement = std::move(a); },
               [&](caf::error& e) {
                 fail(ErrorCode::unavailable, "it did not send its cluster spec within {} ms: {}",
                      connect_bound().count(), system().render(e));
               });
  const std::string target = links->tasks[std::size_t(target_task)].id.to_string();
  const std::string difference = first_difference(target_agreement, target + "'s", agreement,
                                                  links->tasks[std::size_t(i)].id.to_string() + "'s");
  if (!difference.empty())
    fail(ErrorCode::failed_precondition,
         "its cluster spec differs from that of {} (this session's target): {}; start every task with the same spec",
         target, difference);
}

// The clock offset, NTP's way: of 5 pings, the one with the shortest round trip t0 -> t2,
// assuming the member read its clock (t1) halfway: offset = t1 - (t0 + t2) / 2, off by at most
// (t2 - t0) / 2 (a member on the same host shares the clock: offset about 0). (offset, error);
// error -1: no ping was answered.
std::pair<int64_t, int64_t> Master::Impl::clock_offset(const WorkerActor& worker, caf::scoped_actor& self) {
  int64_t offset = 0, error = -1;
  for (int k = 0; k < 5; ++k) {
    const int64_t t0 = trace::now_ns();
    self->request(worker, caf::duration{connect_bound()}, clock_atom::value)
        .receive(
            [&](int64_t t1) {
              const int64_t t2 = trace::now_ns();
              if (error < 0 || (t2 - t0) / 2 < error) {
                error = (t2 - t0) / 2;
                offset = t1 - t0 / 2 - t2 / 2;
              }
            },
            [&](caf::error&) {});
  }
  return {offset, error};
}

void Master::Impl::connect_unnamed(int i) {
  ConnectTurn turn(*this);
  TaskLink& t = links->tasks[std::size_t(i)];
  if (t.retired) fail(ErrorCode::failed_precondition, "it took over another task: it is no task of its own");
  const WorkerActor worker = reach(i);
  caf::scoped_actor self{system()};
  TaskLink found;  // what the member says of itself
  if (!identify(i, worker, self, found)) return;
  check_agreement(i, worker, self);
  const auto [offset, error] = clock_offset(worker, self);
  self->send(owner, caf::actor_cast<caf::actor>(worker));  // to monitor it
  std::lock_guard<std::mutex> lock(links->mutex);
  t.clock_offset = offset;
  t.clock_error = error;
  t.worker = worker;
  t.inbox = found.inbox;
  t.incarnation = found.incarnation;
  t.devices = std::move(found.devices);
  t.lost.clear();
}

Master::Master(const std::string& target, const MasterOptions& options) : impl_(new Impl) {
  Impl& im = *impl_;
  im.options = options;
  const TaskAddress at = parse_target(target);
  {
    static std::mutex mutex;
    static std::weak_ptr<MasterSystem> shared;
    std::lock_guard<std::mutex> lock(mutex);
    im.sys = shared.lock();
    // A session with another TLS identity (or none) gets an actor system of its own.
    if (im.sys && !(im.sys->tls == options.network.tls)) im.sys = std::make_shared<MasterSystem>(options.network);
    if (!im.sys) shared = im.sys = std::make_shared<MasterSystem>(options.network);
  }
  char host[256] = "?";
  gethostname(host, sizeof host - 1);
  im.owner_name = fmt::format("session of {} pid {}", host, getpid());
  im.owner = im.system().spawn(owner_actor, im.links);

  // The target says what the cluster is.
  using Clock = std::chrono::steady_clock;
  const auto started = Clock::now();
  const auto deadline = started + options.startup_timeout;
  const auto tell = options.on_waiting ? options.on_waiting : report_to_stderr;
  // Tries `attempt` until it succeeds or the startup bound passes. A wait is told when it
  // begins (the first attempt failed) and every kWaitingNotice after; the error names `who`
  // and how long this master waited in all.
  auto with_retries = [&](const std::string& who, auto&& attempt) {
    WaitNotice notice;
    for (;;) {
      try {
        return attempt();
      } catch (const Error& e) {
        // A member that answers and disagrees (another spec, another task) will not change its mind.
        if (e.code() == ErrorCode::failed_precondition) throw Error(e.code(), fmt::format("{}: {}", who, e.what()));
        const auto now = Clock::now();
        const double waited = std::chrono::duration<double>(now - started).count();
        if (now >= deadline)
          fail(e.code(), "{} did not answer: this session waited {:.1f} s for it, past its cluster_startup_timeout of "
               "{:.1f} s: {}", who, waited, std::chrono::duration<double>(options.startup_timeout).count(), e.what());
        if (notice.due())
          tell(notice.first() ? fmt::format("waiting for {} ({:.0f} s): {}", who, waited, e.what())
                              : fmt::format("still waiting for {} ({:.0f} s)", who, waited));
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
      }
    }
  };
  std::vector<std::string> tasks, addresses;
  with_retries("the session's target member at " + at.to_string(), [&] {
    WorkerActor worker = connect_member(im.system(), at, im.connect_bound());
    caf::scoped_actor self{im.system()};
    self->request(worker, caf::duration{im.connect_bound()}, agreement_atom::value)
        .receive([&](std::vector<std::string>& a) { im.target_agreement = std::move(a); },
                 [&](caf::error& e) {
                   fail(ErrorCode::unavailable, "the member at {} did not send its cluster spec within {} ms: {}",
                        at.to_string(), im.connect_bound().count(), im.system().render(e));
                 });
    self->request(worker, caf::duration{im.connect_bound()}, spec_atom::value)
        .receive([&](std::vector<std::string>& t, std::vector<std::string>& a) { tasks = std::move(t), addresses = std::move(a); },
                 [&](caf::error& e) {
                   fail(ErrorCode::unavailable, "the member at {} did not send its cluster spec within {} ms: {}",
                        at.to_string(), im.connect_bound().count(), im.system().render(e));
                 });
  });
  im.target_task = -1;
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    TaskLink link;
    link.id = parse_task_id(tasks[i]);
    link.address = parse_task_address(addresses[i], "the cluster spec of " + at.to_string());
    if (link.address == at) im.target_task = int(i);
    im.links->tasks.push_back(std::move(link));
  }
  if (im.target_task < 0)
    fail(ErrorCode::failed_precondition, "the member at {} runs a cluster spec without its own address", at.to_string());
  for (int i = 0; i < int(im.links->tasks.size()); ++i) with_retries(im.describe(i), [&] { im.connect_unnamed(i); });
}

Master::~Master() {
  Impl& im = *impl_;
  for (auto& s : im.signatures)
    if (s->handle != 0) im.deregister(*s, s->handle);
  caf::anon_send_exit(im.owner, caf::exit_reason::user_shutdown);
}

std::vector<TaskTransfers> Master::transfer_stats() const {
  Impl& im = *impl_;
  std::vector<std::pair<std::string, WorkerActor>> workers;
  {
    std::lock_guard<std::mutex> lock(im.links->mutex);
    for (auto& t : im.links->tasks)
      if (t.lost.empty()) workers.push_back({t.id.to_string(), t.worker});
  }
  std::vector<TaskTransfers> out;
  caf::scoped_actor self{im.system()};
  for (auto& [task, worker] : workers)
    self->request(worker, timeouts::state_query(), transfer_stats_atom::value)
        .receive(
            [&](std::vector<uint64_t>& c) {
              if (c.size() == 7) out.push_back({task, c[0], c[1], c[2], c[3], c[4], c[5], c[6]});
            },
            [](caf::error&) {});
  return out;
}

std::vector<Master::TaskWorker> Master::task_workers(const std::vector<std::string>& only) {
  Impl& im = *impl_;
  std::vector<TaskWorker> out;
  for (auto& task : only) (void)task_index(task);  // throws for a task the cluster lacks
  for (int i = 0; i < int(im.links->tasks.size()); ++i) {
    bool lost = false;
    {
      std::lock_guard<std::mutex> lock(im.links->mutex);
      if (im.links->tasks[std::size_t(i)].retired) continue;
      if (!only.empty() && std::find(only.begin(), only.end(), im.links->tasks[std::size_t(i)].id.to_string()) == only.end())
        continue;
      lost = !im.links->tasks[std::size_t(i)].lost.empty() || !im.links->tasks[std::size_t(i)].worker;
    }
    if (lost) im.connect(i);
    std::lock_guard<std::mutex> lock(im.links->mutex);
    const TaskLink& t = im.links->tasks[std::size_t(i)];
    out.push_back({t.id.to_string(), t.worker, t.incarnation, t.address.to_string()});
  }
  return out;
}

int Master::task_index(const std::string& task) const {
  const Impl& im = *impl_;
  std::lock_guard<std::mutex> lock(im.links->mutex);
  for (int i = 0; i < int(im.links->tasks.size()); ++i)
    if (im.links->tasks[std::size_t(i)].id.to_string() == task) return i;
  std::vector<std::string> all;
  for (auto& t : im.links->tasks) all.push_back(t.id.to_string());
  fail(ErrorCode::invalid_argument, "the cluster has no task {} (its tasks: {})", task, fmt::join(all, ", "));
}

std::vector<std::string> Master::tasks_in_use() const {
  const Impl& im = *impl_;
  std::set<int> used;
  {
    std::lock_guard<std::mutex> lock(im.signatures_mutex);
    for (auto& sig : im.signatures)
      for (auto& share : sig->shares) used.insert(share.task);
  }
  std::vector<std::string> out;
  std::lock_guard<std::mutex> lock(im.links->mutex);
  for (int i : used) out.push_back(im.links->tasks[std::size_t(i)].id.to_string());
  return out;
}

bool Master::task_alive(const std::string& task) {
  Impl& im = *impl_;
  int index = -1;
  uint64_t was = 0;
  {
    std::lock_guard<std::mutex> lock(im.links->mutex);
    for (int i = 0; i < int(im.links->tasks.size()); ++i) {
      const TaskLink& t = im.links->tasks[std::size_t(i)];
      if (t.id.to_string() != task) continue;
      if (t.retired) return false;
      if (t.lost.empty() && t.worker) return true;
      index = i;
      was = t.incarnation;
    }
  }
  if (index < 0) fail(ErrorCode::invalid_argument, "the cluster has no task {}", task);
  try {
    im.connect(index);
  } catch (const Error&) {
    return false;
  }
  std::lock_guard<std::mutex> lock(im.links->mutex);
  return was == 0 || im.links->tasks[std::size_t(index)].incarnation == was;
}

std::optional<std::pair<std::string, std::string>> Master::take_over_with_spare() {
  Impl& im = *impl_;
  int lost = -1;
  std::vector<int> spares;
  {
    std::lock_guard<std::mutex> lock(im.links->mutex);
    for (int i = 0; i < int(im.links->tasks.size()); ++i) {
      const TaskLink& t = im.links->tasks[std::size_t(i)];
      if (t.retired) continue;
      if (t.id.job == "spare") spares.push_back(i);
      else if (t.id.job == "ps" && lost < 0 && (!t.lost.empty() || !t.worker)) lost = i;
    }
  }
  if (lost < 0) return std::nullopt;
  const std::string task = im.links->tasks[std::size_t(lost)].id.to_string();
  for (int s : spares) {
    const TaskLink& spare = im.links->tasks[std::size_t(s)];
    const std::string spare_task = spare.id.to_string();
    const TaskAddress at = spare.address;
    try {
      WorkerActor worker = connect_member(im.system(), at, im.connect_bound());
      caf::scoped_actor self{im.system()};
      self->request(worker, caf::duration{im.connect_bound()}, take_over_atom::value, task)
          .receive([](std::string&, uint64_t, std::string&) {},
                   [&](caf::error& e) {
                     fail(ErrorCode::unavailable, "spare {} did not take over {}: {}", spare_task, task, im.system().render(e));
                   });
    } catch (const Error&) {
      continue;  // that spare is lost or busy: the next
    }
    {
      std::lock_guard<std::mutex> lock(im.links->mutex);
      im.links->tasks[std::size_t(s)].retire(task);
      im.links->tasks[std::size_t(lost)].address = at;
    }
    // Every member learns where the task runs now (best effort, each bounded): a master that
    // reconnects it asks its own target member.
    std::vector<std::pair<std::string, TaskAddress>> members;
    {
      std::lock_guard<std::mutex> lock(im.links->mutex);
      for (auto& t : im.links->tasks)
        if (!t.retired) members.push_back({t.id.to_string(), t.address});
    }
    caf::scoped_actor self{im.system()};
    for (auto& [name, address] : members) {
      try {
        WorkerActor w = connect_member(im.system(), address, im.connect_bound());
        self->request(w, caf::duration{im.connect_bound()}, moved_atom::value, task, at.to_string(), spare_task)
            .receive([] {}, [](caf::error&) {});
      } catch (const Error&) {
      }
    }
    im.connect(lost);
    return std::make_pair(task, spare_task);
  }
  return std::nullopt;
}

std::string Master::target_task() const { return impl_->links->tasks.at(std::size_t(impl_->target_task)).id.to_string(); }

caf::actor_system& Master::system() { return impl_->system(); }

SignaturePlacement Master::Impl::placement(std::map<std::string, int>& task_of) {
  SignaturePlacement where;
  where.single_process = false;
  std::lock_guard<std::mutex> lock(links->mutex);
  std::vector<int> order{target_task};
  for (int i = 0; i < int(links->tasks.size()); ++i)
    if (i != target_task) order.push_back(i);
  for (int i : order)
    for (auto& d : links->tasks[std::size_t(i)].devices) {
      where.devices.push_back(d);
      task_of[d] = i;
    }
  where.default_job = links->tasks[std::size_t(target_task)].id.job;
  where.default_task = links->tasks[std::size_t(target_task)].id.index;
  where.allow_soft_placement = options.allow_soft_placement;
  where.policy = options.placement_policy;
  return where;
}

Master::Signature::Share Master::Impl::share_for(const PlacedSignature& placed, int task, const std::vector<int>& parts) {
  Signature::Share share;
  share.task = task;
  LocalSignature local = placed.share(parts);
  share.fetch_index = local.fetch_index;
  share.feed_index = local.feed_index;
  RegisterGraph& r = share.request;
  r.owner = owner_name;
  r.owner_actor = owner;
  for (std::size_t k = 0; k < local.set.parts.size(); ++k) {
    WirePartition wp;
    wp.device = local.set.parts[k].device;
    auto bytes = graph_to_bytes(*local.set.parts[k].graph);
    wp.graph.assign(bytes.begin(), bytes.end());
    for (auto& [e, slot] : local.set.signatures[k].fetches) {
      wp.fetch_nodes.push_back(e.node);
      wp.fetch_ports.push_back(e.port);
      wp.fetch_slots.push_back(slot);
    }
    wp.targets.assign(local.set.signatures[k].targets.begin(), local.set.signatures[k].targets.end());
    r.parts.push_back(std::move(wp));
  }
  for (auto& a : local.set.args) {
    r.arg_parts.push_back(a.part);
    r.arg_nodes.push_back(a.node);
  }
  r.fetch_names = local.set.fetch_names;
  r.num_targets = local.set.num_targets;
  return share;
}

void Master::Impl::note_transfers(Signature& sig, const Partitions& cut, const std::map<std::string, int>& task_of,
                                  const std::map<int, int>& share_of) {
  for (auto& part : cut.parts) {
    const int from = task_of.at(part.device);
    auto& share = sig.shares[std::size_t(share_of.at(from))];
    for (int id = 0; id < part.graph->size(); ++id) {
      const Node& n = part.graph->node(id);
      if (n.op != "_Send") continue;
      const std::string to_device = get_attr<std::string>(n.attrs, "recv_device", n.name);
      const int to = task_of.at(to_device);
      if (to == from) continue;
      const Node& producer = part.graph->node(n.inputs[0].node);
      const bool half = producer.output_types[n.inputs[0].port] == DType::float32 &&
                        (options.float16_transfer || get_attr_or<bool>(producer.attrs, "_float16_transfer", false));
      if (half) share.request.float16_keys.push_back(rendezvous_key(n));
      if (share.edges_from.size() < 8)
        share.edges_from.push_back(
            fmt::format("'{}' for {}", get_attr<std::string>(n.attrs, "tensor_name", n.name), to_device));
      for (auto [a, b] : {std::pair{from, to}, std::pair{to, from}}) {
        auto& peers = sig.shares[std::size_t(share_of.at(a))].request.peers;
        const TaskLink& peer = links->tasks[std::size_t(b)];
        const std::string name = peer.id.to_string();
        if (std::none_of(peers.begin(), peers.end(), [&](const TaskPeer& tp) { return tp.task == name; }))
          peers.push_back({name, peer.address.host, peer.address.port, 0, {}});
      }
    }
  }
}

std::shared_ptr<Master::Signature> Master::prepare(const Graph& graph, const std::vector<Endpoint>& feeds,
                                                   const std::vector<Endpoint>& fetches, const std::vector<int>& targets) {
  Impl& im = *impl_;
  std::map<std::string, int> task_of;  // device -> task index
  const PlacedSignature placed = place_signature(graph, feeds, fetches, targets, im.placement(task_of));
  auto sig = std::make_shared<Signature>();
  sig->num_fetches = int(placed.sub.fetches.size());
  std::map<int, std::vector<int>> parts_of;  // task -> partitions
  for (int i = 0; i < int(placed.cut.parts.size()); ++i)
    parts_of[task_of.at(placed.cut.parts[std::size_t(i)].device)].push_back(i);
  std::map<int, int> share_of;  // task -> share
  for (auto& [task, parts] : parts_of) {
    share_of[task] = int(sig->shares.size());
    sig->shares.push_back(im.share_for(placed, task, parts));
  }
  im.note_transfers(*sig, placed.cut, task_of, share_of);
  im.current_handle(*sig);
  std::lock_guard<std::mutex> lock(im.signatures_mutex);
  im.signatures.push_back(sig);
  return sig;
}

uint64_t Master::Impl::current_handle(Signature& sig) {
  std::unique_lock<std::mutex> lock(sig.mutex);
  // Another step of this signature is registering it: its wait is bounded (each remote answer
  // is), so this one's is too.
  sig.registered.wait(lock, [&] { return !sig.registering; });
  sig.registering = true;
  lock.unlock();
  struct Release {
    Signature& sig;
    ~Release() {
      {
        std::lock_guard<std::mutex> relock(sig.mutex);
        sig.registering = false;
      }
      sig.registered.notify_all();
    }
  } release{sig};
  make_current(sig);
  return sig.handle;
}

void Master::Impl::make_current(Signature& sig) {
  bool stale = sig.stale.exchange(false) || sig.handle == 0;
  for (auto& share : sig.shares) {
    std::string lost;
    uint64_t incarnation = 0;
    {
      std::lock_guard<std::mutex> lock(links->mutex);
      lost = links->tasks[std::size_t(share.task)].lost;
      incarnation = links->tasks[std::size_t(share.task)].incarnation;
    }
    if (!lost.empty()) {
      try {
        connect_unnamed(share.task);
      } catch (const Error& e) {
        fail(ErrorCode::unavailable, "{} is unreachable: {}; reconnecting failed: {}", describe(share.task), lost, e.what());
      }
      std::lock_guard<std::mutex> lock(links->mutex);
      incarnation = links->tasks[std::size_t(share.task)].incarnation;
    }
    if (incarnation != share.incarnation) stale = true;
  }
  if (!stale) return;
  if (sig.handle != 0) deregister(sig, sig.handle);
  register_signature(sig);
}

void Master::Impl::register_signature(Signature& sig) {
  const uint64_t handle = random_id();
  caf::scoped_actor self{system()};
  std::map<std::string, uint64_t> incarnation_of;
  std::map<std::string, caf::actor> inbox_of;
  std::map<std::string, TaskAddress> address_of;  // where each runs now (a spare's, after a take-over)
  std::vector<WorkerActor> workers;
  {
    std::lock_guard<std::mutex> lock(links->mutex);
    for (auto& t : links->tasks) {
      incarnation_of[t.id.to_string()] = t.incarnation;
      inbox_of[t.id.to_string()] = t.inbox;
      address_of[t.id.to_string()] = t.address;
    }
    for (auto& share : sig.shares) workers.push_back(links->tasks[std::size_t(share.task)].worker);
  }
  // Sent (not requested) so that the wait can watch the tasks too: a worker's answer comes back as
  // an ordinary message, and a task lost meanwhile ends the wait at once instead of at the bound.
  for (std::size_t i = 0; i < sig.shares.size(); ++i) {
    auto& share = sig.shares[i];
    share.request.handle = handle;
    for (auto& peer : share.request.peers) {
      peer.incarnation = incarnation_of[peer.task];
      peer.inbox = inbox_of[peer.task];
      peer.host = address_of[peer.task].host;
      peer.port = address_of[peer.task].port;
    }
    share.incarnation = incarnation_of[links->tasks[std::size_t(share.task)].id.to_string()];
    self->monitor(workers[i]);
    self->send(workers[i], register_atom::value, share.request);
  }
  std::string failures;
  ErrorCode code = ErrorCode::ok;
  std::vector<bool> answered(workers.size(), false);
  std::size_t remaining = workers.size();
  auto failed = [&](int i, ErrorCode c, const std::string& why) {
    if (code == ErrorCode::ok) code = c;
    failures += fmt::format("\n  {}: {}", describe(sig.shares[std::size_t(i)].task), why);
    if (!answered[std::size_t(i)]) answered[std::size_t(i)] = true, --remaining;
  };
  const auto until = std::chrono::steady_clock::now() + timeouts::member_register();
  while (remaining > 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
    bool late = false;
    self->receive(
        [&](int32_t c, std::string& message) {
          const int i = index_of(workers, caf::actor_cast<caf::actor>(self->current_sender()).address());
          if (i < 0 || answered[std::size_t(i)]) return;
          if (c != int32_t(ErrorCode::ok)) return failed(i, ErrorCode(c), message);
          answered[std::size_t(i)] = true;
          --remaining;
        },
        [&](caf::down_msg& dm) {
          const int i = index_of(workers, dm.source);
          if (i >= 0 && !answered[std::size_t(i)])
            failed(i, ErrorCode::unavailable, fmt::format("lost while registering ({})", system().render(dm.reason)));
        },
        caf::after(std::chrono::milliseconds(std::max<int64_t>(0, left.count()))) >> [&] { late = true; });
    if (late)
      for (std::size_t i = 0; i < workers.size(); ++i)
        if (!answered[i]) failed(int(i), ErrorCode::unavailable,
                 fmt::format("did not answer the registration within {} s",
                             std::chrono::duration_cast<std::chrono::seconds>(timeouts::member_register()).count()));
  }
  for (auto& w : workers) self->demonitor(w.address());
  if (code != ErrorCode::ok) {
    deregister(sig, handle);
    sig.handle = 0;
    fail(code, "registering the graph's partitions failed:{}", failures);
  }
  sig.handle = handle;
}

void Master::Impl::deregister(const Signature& sig, uint64_t handle) {
  caf::scoped_actor self{system()};
  for (auto& share : sig.shares) {
    WorkerActor worker;
    {
      std::lock_guard<std::mutex> lock(links->mutex);
      if (!links->tasks[std::size_t(share.task)].lost.empty()) continue;
      worker = links->tasks[std::size_t(share.task)].worker;
    }
    // Best effort, bounded: a member that does not answer drops the graph when this master goes.
    self->request(worker, caf::duration{connect_bound()}, deregister_atom::value, handle)
        .receive([](int32_t, std::string&) {}, [](caf::error&) {});
  }
}

std::string Master::Impl::explain_step(const Signature& sig, uint64_t handle, uint64_t step,
                                       const std::vector<WorkerActor>& workers, const std::vector<bool>& ask) {
  caf::scoped_actor self{system()};
  using Handle = decltype(self->request(WorkerActor{}, timeouts::late_step_report(), step_waits_atom::value, handle, step));
  std::vector<std::pair<std::size_t, Handle>> asked;
  for (std::size_t i = 0; i < workers.size(); ++i)
    if (ask[i] && workers[i])
      asked.push_back({i, self->request(workers[i], timeouts::late_step_report(), step_waits_atom::value, handle, step)});
  std::vector<TaskWaits> tasks;
  std::vector<std::string> labels;
  for (auto& [i, h] : asked) {
    const int task = sig.shares[i].task;
    TaskWaits t{links->tasks[std::size_t(task)].id.to_string(), {}, true};
    h.receive([&](std::vector<WaitReport>& waits) { t.waits = std::move(waits); },
              [&](caf::error&) { t.answered = false; });
    tasks.push_back(std::move(t));
    labels.push_back(describe(task) + ": ");
  }
  return explain_waits(tasks, labels);
}

std::string Master::describe_step(Signature& sig, uint64_t step) {
  const uint64_t handle = sig.handle;
  auto workers = impl_->workers_of(sig);
  return impl_->explain_step(sig, handle, step, workers, std::vector<bool>(workers.size(), true));
}

std::string Master::describe_running() {
  std::vector<std::pair<uint64_t, Signature*>> steps;
  {
    std::lock_guard<std::mutex> lock(impl_->running_mutex);
    steps.assign(impl_->running.begin(), impl_->running.end());
  }
  std::string out;
  for (auto& [step, sig] : steps) {
    const std::string waits = describe_step(*sig, step);
    out += fmt::format("step {}: {}\n", step, waits.empty() ? kKernelsRunning : waits);
  }
  return out;
}

std::optional<StepResult> Master::Impl::await_shares(Signature& sig, uint64_t handle, uint64_t step,
                                                     caf::scoped_actor& self, const std::vector<WorkerActor>& workers,
                                                     std::chrono::milliseconds deadline, StepResult& result) {
  std::vector<bool> answered(sig.shares.size(), false);
  std::size_t remaining = sig.shares.size();
  std::optional<StepResult> failure;
  const auto until = deadline.count() > 0 ? std::chrono::steady_clock::now() + deadline
                                          : std::chrono::steady_clock::time_point::max();
  while (remaining > 0 && !failure) {
    auto on_done = [&](run_done_atom, uint64_t h, uint64_t s, RunGraphReply& reply) {
      if (h != handle || s != step) return;
      const auto from = caf::actor_cast<caf::actor>(self->current_sender());
      int i = from ? index_of(workers, from.address()) : -1;
      if (i < 0) return;
      if (reply.code != int32_t(ErrorCode::ok)) {
        if (reply.code == int32_t(ErrorCode::unavailable)) sig.stale = true;  // a task lost a peer
        failure = StepResult{{}, ErrorCode(reply.code), fmt::format("step {}: {}", step, reply.message),
                             std::move(reply.device)};
        return;
      }
      if (answered[std::size_t(i)]) return;
      answered[std::size_t(i)] = true;
      --remaining;
      auto& share = sig.shares[std::size_t(i)];
      try {
        for (std::size_t k = 0; k < reply.fetches.size() && k < share.fetch_index.size(); ++k)
          result.fetches[std::size_t(share.fetch_index[k])] =
              from_wire(reply.fetches[k], fmt::format("fetch {} from {}", k, describe(share.task)));
      } catch (const Error& e) {
        failure = StepResult{{}, e.code(), e.what()};
      }
    };
    auto on_down = [&](caf::down_msg& dm) {
      int i = index_of(workers, dm.source);
      if (i < 0) return;
      failure = share_lost(sig.shares[std::size_t(i)], step, dm);
    };
    if (until == std::chrono::steady_clock::time_point::max()) {
      self->receive(on_done, on_down);
    } else {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now());
      bool late = false;
      self->receive(on_done, on_down,
                    caf::after(std::chrono::milliseconds(std::max<int64_t>(0, left.count()))) >> [&] { late = true; });
      if (late) failure = step_overdue(sig, handle, step, workers, answered, deadline);
    }
  }
  return failure;
}

StepResult Master::Impl::share_lost(const Signature::Share& share, uint64_t step, const caf::down_msg& dm) {
  std::string why = fmt::format("its connection was lost ({})", system().render(dm.reason));
  {
    std::lock_guard<std::mutex> lock(links->mutex);
    auto& t = links->tasks[std::size_t(share.task)];
    if (t.lost.empty()) t.lost = why;
  }
  std::string waiting = fmt::format("its share of the step (RunGraph of {} partition(s))", share.request.parts.size());
  for (auto& e : share.edges_from) waiting += ", " + e;
  return StepResult{{}, ErrorCode::unavailable,
                    fmt::format("step {}: {} was lost: {}; the step was waiting for {}", step, describe(share.task),
                                why, waiting)};
}

StepResult Master::Impl::step_overdue(const Signature& sig, uint64_t handle, uint64_t step,
                                      const std::vector<WorkerActor>& workers, const std::vector<bool>& answered,
                                      std::chrono::milliseconds deadline) {
  // Which nodes of each task still running wait for what (and from which task), asked
  // before the abort clears it; a task that does not answer in time is only named.
  std::string running;
  std::vector<bool> ask(answered.size());
  for (std::size_t i = 0; i < answered.size(); ++i) {
    ask[i] = !answered[i];
    if (ask[i]) running += (running.empty() ? "" : ", ") + describe(sig.shares[i].task);
  }
  const std::string waiting = explain_step(sig, handle, step, workers, ask);
  return StepResult{{}, ErrorCode::deadline_exceeded,
                    fmt::format("step {} did not finish within its deadline of {} ms and was aborted; still "
                                "running on {}{}",
                                step, deadline.count(), running, waiting.empty() ? "" : "; " + waiting)};
}

StepResult Master::run(Signature& sig, uint64_t step, std::vector<Tensor> feeds, std::chrono::milliseconds deadline,
                       bool traced) {
  Impl& im = *impl_;
  uint64_t handle = 0;
  try {
    handle = im.current_handle(sig);
  } catch (const Error& e) {
    return StepResult{{}, e.code(), fmt::format("step {}: {}", step, e.what())};
  }

  {
    std::lock_guard<std::mutex> lock(im.running_mutex);
    im.running[step] = &sig;
  }
  struct Ended {
    Impl& im;
    uint64_t step;
    ~Ended() {
      std::lock_guard<std::mutex> lock(im.running_mutex);
      im.running.erase(step);
    }
  } ended{im, step};
  caf::scoped_actor self{im.system()};
  std::vector<WorkerActor> workers = im.workers_of(sig);
  // Every task has marked the step traced before any starts it: a task's kernels may fire on
  // another task's values before its own run_graph arrives, and its inbox records a value of a
  // traced step only once the mark is there. So each mark is answered before any run_graph goes
  // out (sent without waiting, a value from a fast task could beat a slower task's mark, and its
  // receipt was missing from the trace). The marks go out together and are awaited together:
  // one round trip, and one bound (a task that does not answer runs the step untraced, and the
  // step meets its fate as any other).
  if (traced) {
    std::vector<decltype(self->request(workers[0], timeouts::state_query(), trace_atom::value, handle, step))> marks;
    for (auto& w : workers) marks.push_back(self->request(w, timeouts::state_query(), trace_atom::value, handle, step));
    for (auto& mark : marks) mark.receive([](bool) {}, [](caf::error&) {});
  }
  for (std::size_t i = 0; i < sig.shares.size(); ++i) {
    self->monitor(workers[i]);
    std::vector<WireTensor> mine;
    for (int f : sig.shares[i].feed_index) mine.push_back(to_wire(feeds[std::size_t(f)]));
    self->send(workers[i], run_graph_atom::value, handle, step, std::move(mine));
  }

  StepResult result;
  result.fetches.resize(std::size_t(sig.num_fetches));
  std::optional<StepResult> failure = im.await_shares(sig, handle, step, self, workers, deadline, result);
  for (auto& w : workers) self->demonitor(w.address());
  if (!failure) return result;
  for (std::size_t i = 0; i < workers.size(); ++i)
    self->send(workers[i], abort_atom::value, handle, step, int32_t(failure->code), failure->message);
  return std::move(*failure);
}

TraceParts Master::take_trace(Signature& sig, const std::vector<uint64_t>& steps, int64_t from_ns, int64_t to_ns,
                              int64_t base_ns) {
  Impl& im = *impl_;
  const uint64_t handle = sig.handle;
  TraceParts out;
  caf::scoped_actor self{im.system()};
  std::vector<WorkerActor> workers = im.workers_of(sig);
  using Answer = decltype(self->request(workers[0], timeouts::state_query(), trace_atom::value, handle, steps,
                                        int64_t(0), int64_t(0), int64_t(0), int32_t(0)));
  std::vector<std::pair<std::string, Answer>> asked;
  for (std::size_t i = 0; i < sig.shares.size(); ++i) {
    const int task = sig.shares[i].task;
    int64_t offset = 0, error = -1;
    TraceParts::Process p;
    {
      std::lock_guard<std::mutex> lock(im.links->mutex);
      const TaskLink& t = im.links->tasks[std::size_t(task)];
      offset = t.clock_offset;
      error = t.clock_error;
      p = {task + 2, t.id.to_string(), t.address.to_string(), offset, error};
    }
    out.processes.push_back(p);
    if (!workers[i]) {
      out.missing.push_back(p.task + " (not connected)");
      continue;
    }
    // Times go to the member on its own clock; its events come back on the master's. Every
    // task is asked before any answer is awaited: one round trip, one bound for all.
    asked.push_back({p.task, self->request(workers[i], timeouts::state_query(), trace_atom::value, handle, steps,
                                           from_ns + offset, to_ns + offset, base_ns + offset, int32_t(p.pid))});
  }
  for (auto& [task, answer] : asked)
    answer.receive([&](std::vector<std::string>& lines) { out.lines.insert(out.lines.end(), lines.begin(), lines.end()); },
                   [&](caf::error& e) { out.missing.push_back(fmt::format("{} ({})", task, im.system().render(e))); });
  return out;
}

}  // namespace troupe
