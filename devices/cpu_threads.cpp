#include "devices/cpu_threads.hpp"

#include <cblas.h>
#include <sched.h>
#include <unistd.h>
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <condition_variable>
#include <deque>
#include <cstdlib>
#include <exception>
#include <fstream>
#include <sstream>
#include <mutex>
#include <thread>

namespace troupe {
namespace {

int hardware_threads() { return usable_cores(); }

std::optional<int> quota_cores(long long quota, long long period) {
  if (quota <= 0 || period <= 0) return std::nullopt;
  return int(std::max<long long>(1, (quota + period - 1) / period));
}

// The cgroup v1 quota of the process's cgroup of the cpu controller ("N:cpu,cpuacct:/path" in
// /proc/self/cgroup), if it sets one.
std::optional<int> cgroup_v1_cores() {
  std::ifstream self("/proc/self/cgroup");
  std::string line;
  while (std::getline(self, line)) {
    auto first = line.find(':'), second = line.find(':', first + 1);
    if (first == std::string::npos || second == std::string::npos) continue;
    const std::string controllers = "," + line.substr(first + 1, second - first - 1) + ",";
    if (controllers.find(",cpu,") == std::string::npos) continue;
    const std::string path = line.substr(second + 1);
    for (const char* mount : {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct"}) {
      const std::string dir = mount + (path == "/" ? std::string() : path);
      std::ifstream q(dir + "/cpu.cfs_quota_us"), p(dir + "/cpu.cfs_period_us");
      long long quota = -1, period = 0;
      if (q >> quota && p >> period) return quota_cores(quota, period);
    }
  }
  return std::nullopt;
}

std::optional<int> cgroup_v2_cores();

}  // namespace

std::optional<int> cores_from_cpu_max(const std::string& line) {
  std::istringstream in(line);
  std::string quota;
  long long period = 0;
  if (!(in >> quota >> period) || quota == "max") return std::nullopt;
  try {
    return quota_cores(std::stoll(quota), period);
  } catch (const std::exception&) {
    return std::nullopt;
  }
}

namespace {

// The tightest cpu.max of the process's cgroup v2 and its ancestors ("0::/path" in
// /proc/self/cgroup; a limit on a parent holds for its children too).
std::optional<int> cgroup_v2_cores() {
  std::ifstream self("/proc/self/cgroup");
  std::string line, path;
  while (std::getline(self, line))
    if (line.rfind("0::", 0) == 0) path = line.substr(3);
  if (path.empty()) return std::nullopt;
  std::optional<int> tightest;
  for (;;) {
    std::ifstream max("/sys/fs/cgroup" + (path == "/" ? std::string() : path) + "/cpu.max");
    std::string limit;
    if (max && std::getline(max, limit))
      if (auto cores = cores_from_cpu_max(limit)) tightest = tightest ? std::min(*tightest, *cores) : *cores;
    if (path == "/" || path.empty()) break;
    auto slash = path.rfind('/');
    path = slash == 0 ? "/" : path.substr(0, slash);
  }
  return tightest;
}

}  // namespace

void bound_openmp_spinning(char** argv) {
  if (std::getenv("GOMP_SPINCOUNT") || std::getenv("OMP_WAIT_POLICY")) return;
  if (setenv("GOMP_SPINCOUNT", "10000", 1) != 0) return;
  // By the file's own path where it can be read, so that the process keeps its name (ps, top,
  // perf show "exe" for a program executed as /proc/self/exe).
  char path[4096];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
  if (n > 0) {
    path[n] = '\0';
    ::execv(path, argv);
  }
  ::execv("/proc/self/exe", argv);
  unsetenv("GOMP_SPINCOUNT");  // not re-executed: this process's libgomp keeps its settings
}

int usable_cores() {
  int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof mask, &mask) == 0) cores = std::max(1, CPU_COUNT(&mask));
  std::optional<int> quota = cgroup_v2_cores();
  if (!quota) quota = cgroup_v1_cores();
  return quota ? std::min(cores, *quota) : cores;
}

namespace {

std::atomic<int>& setting() {
  static std::atomic<int> n{hardware_threads()};
  return n;
}

// A thread's own cache line: whether it holds a single core that `free` does not count (a
// seated lease, below), written by that thread only.
struct alignas(64) Seat {
  std::atomic<int> held{0};
  bool taken = false;  // under Cores::mutex: a thread sits here
};
constexpr int kSeats = 64;

struct Cores {
  // The count itself is atomic: a single core is taken and given back without the mutex (one
  // atomic operation each way) while no team waits. Waiting, and changing the budget, go
  // through the mutex (with `freed`); a waiter counts itself in `waiters` under it before it
  // looks at the count, and whoever gives cores back looks at `waiters` after adding them, so a
  // wake-up is never lost. Held only to count, never while a kernel runs or OpenBLAS is told its
  // threads, so no other lock is taken under it.
  //
  // Seated leases: even that one atomic count is a cache line that every single-core kernel
  // writes, passed between the cores at every firing when two workers run kernels side by side
  // (a spread loop's iterations). While no lease is counted (no team leases or waits, nor any
  // single core is counted) and no more threads lease single cores than the budget has (each
  // with a `Seat`), the single cores cannot run out: a thread then marks its lease on its own
  // seat's line (`held`), and nothing shared is written. `counted` is nonzero while that does
  // not hold: each counted lease adds one while it waits and while it is held, too many threads
  // one (`crowded`). A counted lease takes from `free` only when no seat is held; a thread that
  // marks its seat looks at `counted` after marking (both sequentially consistent: one of the
  // two sees the other) and counts its lease instead if it is nonzero. So seated and counted
  // leases never overlap, and the seated ones are at most the budget.
  std::mutex mutex;
  std::condition_variable freed;
  std::atomic<int> budget{hardware_threads()};
  std::atomic<int> free{hardware_threads()};
  std::atomic<int> teams_waiting{0};
  std::atomic<int> waiters{0};
  std::atomic<int> counted{0};
  std::atomic<int> seats_used{0};  // seats [0, seats_used) have been taken at some time
  Seat seats[kSeats];
  int leasing_threads = 0;  // under the mutex: threads that lease single cores, seated or not
  int unseated = 0;         // under the mutex: of them, those that found no seat
  bool crowded = false;     // under the mutex: they are more than the budget, or some unseated

  // Takes `n` cores if they are free (and, for one core, no team waits for them) and no seated
  // lease is held (the caller has raised `counted`: no seat is taken after it looked).
  bool try_take(int n) {
    if (seat_held()) return false;
    int f = free.load();
    while (f >= n && (n > 1 || teams_waiting.load() == 0))
      if (free.compare_exchange_weak(f, f - n)) return true;
    return false;
  }
  bool seat_held() const {
    const int used = seats_used.load();
    for (int i = 0; i < used; ++i)
      if (seats[i].held.load()) return true;
    return false;
  }
  // Wakes the waiters, if any, after cores were given back (or the budget grew, or a team
  // stopped waiting, or a seat was let go of).
  void wake() {
    if (waiters.load() == 0) return;
    std::lock_guard lock(mutex);
    freed.notify_all();
  }
  // Under the mutex, after the leasing threads, the unseated ones or the budget changed.
  void update_crowding() {
    const bool now = leasing_threads > budget.load() || unseated > 0;
    if (now != crowded) counted.fetch_add(now ? 1 : -1);
    crowded = now;
    freed.notify_all();
  }
};

Cores& cores() {
  static Cores* c = new Cores;  // never destroyed: kernels may run during static destruction
  return *c;
}

// This thread's seat: nullptr before its first single-core lease, and if it found none.
thread_local Seat* tls_seat [[gnu::tls_model("initial-exec")]] = nullptr;
thread_local bool tls_leasing [[gnu::tls_model("initial-exec")]] = false;

// Counts this thread among those that lease single cores (its first such lease), with a seat
// if one is free; counted out again when the thread ends.
void join_leasing_threads() {
  struct Leaving {
    ~Leaving() {
      auto& c = cores();
      std::lock_guard lock(c.mutex);
      --c.leasing_threads;
      if (tls_seat) tls_seat->taken = false;
      else --c.unseated;
      tls_seat = nullptr;
      c.update_crowding();
    }
  };
  auto& c = cores();
  {
    std::lock_guard lock(c.mutex);
    ++c.leasing_threads;
    for (int i = 0; i < kSeats && !tls_seat; ++i)
      if (!c.seats[i].taken) {
        c.seats[i].taken = true;
        tls_seat = &c.seats[i];
        if (i >= c.seats_used.load()) c.seats_used.store(i + 1);
      }
    if (!tls_seat) ++c.unseated;
    c.update_crowding();
  }
  tls_leasing = true;
  thread_local Leaving leaving;
}

}  // namespace

void set_intra_op_threads(int intra_op, int budget) {
  intra_op = std::max(1, intra_op);
  budget = std::max(1, budget);
  setting().store(intra_op);
  openblas_set_num_threads(intra_op);
  auto& c = cores();
  {
    std::lock_guard lock(c.mutex);
    c.free.fetch_add(budget - c.budget.exchange(budget));
    c.update_crowding();
  }
}

int intra_op_threads() { return setting().load(); }

void apply_intra_op_threads_here() {
  thread_local int applied = 0;
  int n = setting().load(std::memory_order_relaxed);
  if (applied != n) {
    omp_set_num_threads(n);
    applied = n;
  }
}

CoreLease::CoreLease(int n) {
  auto& c = cores();
  if (n <= 1) {
    if (!tls_leasing) [[unlikely]]
      join_leasing_threads();
    if (Seat* seat = tls_seat; seat && c.counted.load() == 0) {
      const int held = seat->held.load(std::memory_order_relaxed);
      seat->held.store(held + 1);
      if (c.counted.load() == 0) {
        seat_ = &seat->held;
        return;
      }
      seat->held.store(held);  // a counted lease came meanwhile: this one is counted too
      c.wake();
    }
  }
  c.counted.fetch_add(1);
  cores_ = std::clamp(n, 1, c.budget.load());
  if (cores_ == 1 && c.try_take(1)) return;
  {
    std::unique_lock lock(c.mutex);
    cores_ = std::clamp(n, 1, c.budget.load());  // again under the lock, which budget changes take
    c.waiters.fetch_add(1);
    if (cores_ > 1) {
      c.teams_waiting.fetch_add(1);
      c.freed.wait(lock, [&] { return c.try_take(cores_); });
      c.teams_waiting.fetch_sub(1);
    } else {
      c.freed.wait(lock, [&] { return c.try_take(1); });
    }
    c.waiters.fetch_sub(1);
  }
  if (cores_ > 1) c.wake();  // single cores held back for this team may go now
}

CoreLease::~CoreLease() {
  auto& c = cores();
  if (seat_) {
    seat_->store(seat_->load(std::memory_order_relaxed) - 1);
    c.wake();  // a counted lease may wait for the seats to be let go of
    return;
  }
  c.free.fetch_add(cores_);
  c.counted.fetch_sub(1);
  c.wake();
}

namespace {

// Team threads: started on demand, one per team running at once, kept for the process.
class TeamThreads {
 public:
  void run(const std::function<void()>& kernel) {
    Job job{&kernel};
    std::unique_lock lock(mutex_);
    jobs_.push_back(&job);
    if (idle_ == 0) {
      std::thread([this] { serve(); }).detach();
    } else {
      work_.notify_one();
    }
    job.done_cv.wait(lock, [&] { return job.done; });
    lock.unlock();
    if (job.error) std::rethrow_exception(job.error);
  }

 private:
  struct Job {
    const std::function<void()>* kernel;
    std::exception_ptr error;
    bool done = false;
    std::condition_variable done_cv;
  };

  void serve() {
    std::unique_lock lock(mutex_);
    for (;;) {
      ++idle_;
      work_.wait(lock, [&] { return !jobs_.empty(); });
      --idle_;
      Job* job = jobs_.front();
      jobs_.pop_front();
      lock.unlock();
      try {
        apply_intra_op_threads_here();
        (*job->kernel)();
      } catch (...) {
        job->error = std::current_exception();
      }
      lock.lock();
      job->done = true;
      job->done_cv.notify_one();
    }
  }

  // Guards jobs_, idle_ and every Job's done (with work_ and the Job's done_cv). A new team
  // thread is started under it; the kernel runs outside it, so it takes no other lock.
  std::mutex mutex_;
  std::condition_variable work_;
  std::deque<Job*> jobs_;
  int idle_ = 0;
};

}  // namespace

void run_as_team(const std::function<void()>& kernel) {
  static TeamThreads* threads = new TeamThreads;  // never destroyed, like its threads
  CoreLease lease(intra_op_threads());
  threads->run(kernel);
}

}  // namespace troupe
