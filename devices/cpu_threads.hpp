#pragma once
// Threads of the CPU device. Process-wide; set by the runtime from SessionOptions::threads
// together with the scheduler (inter-op) threads, so that the two do not oversubscribe the cores.
//
// Intra-op threads are how many threads one kernel may use (oneDNN's OpenMP team, OpenBLAS'
// pool). The cores are leased: a kernel that runs a team takes as many cores as its team has,
// any other kernel with real work one core, and a kernel waits until its cores are free. Why: a
// team splits its work evenly and meets at barriers, so a single-threaded kernel (or a second
// team) on one of its cores holds the whole team up for a scheduler time slice, which costs more
// than the overlap gains. Teams are served before single cores, so a stream of small kernels
// cannot starve them. Thread-safe: the core count is atomic (a single core is taken and given
// back without a lock while no team waits, and without writing a line another thread writes
// while no team is about and each leasing thread has a core of its own), waiting for cores and
// the team threads' queue are each under one mutex in cpu_threads.cpp, taken alone.
#include <atomic>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>

namespace troupe {

// The cores this process may use: the CPUs of its affinity mask (taskset, cpusets), capped by
// its cgroup's CPU quota rounded up (cgroup v2 cpu.max, or v1 cpu.cfs_quota_us / period), at
// least 1. What every thread count defaults to, instead of the machine's hardware threads.
int usable_cores();
// The cores a cgroup v2 `cpu.max` line ("50000 100000", "max 100000") allows; nullopt when it
// sets no limit or cannot be read.
std::optional<int> cores_from_cpu_max(const std::string& line);

// oneDNN's kernel teams are OpenMP teams (libgomp), whose threads spin at every barrier by
// default (GOMP_SPINCOUNT 300000). Alone on its cores that is fine; with another process on them
// the spinning threads keep the descheduled ones from running. libgomp reads its settings when
// it is loaded, before main(), so a program that wants them bounded must start with them set:
// call this first thing in main(). If neither GOMP_SPINCOUNT nor OMP_WAIT_POLICY is set, it sets
// GOMP_SPINCOUNT=10000 (short enough for processes that share the cores, long enough for small
// kernels that wait at many barriers; docs/performance.md, "Two trainings on the same cores")
// and executes the program again (the file /proc/self/exe names, same arguments, same process id
// and name); otherwise, or if that fails, it returns.
void bound_openmp_spinning(char** argv);

// intra_op >= 1 threads per kernel team, cores >= 1 threads that may compute at once. Takes
// effect for OpenBLAS at once and for OpenMP on each thread's next team.
void set_intra_op_threads(int intra_op, int cores);
int intra_op_threads();
// Applies the current setting to the calling thread (OpenMP's thread count is per thread).
// oneDNN kernels do this before they create a primitive, which fixes its team size.
void apply_intra_op_threads_here();

// Held while a kernel computes: `cores` of the budget (at most all of it). Waiting is bounded
// by the run time of the kernels holding the cores, which are busy with them meanwhile. A lease
// of one core taken while no team leases or waits writes only its thread's own cache line
// (a seat, cpu_threads.cpp); it is given back by the thread that took it.
class CoreLease {
 public:
  explicit CoreLease(int cores);
  ~CoreLease();
  CoreLease(const CoreLease&) = delete;
  CoreLease& operator=(const CoreLease&) = delete;

 private:
  int cores_ = 1;
  std::atomic<int>* seat_ = nullptr;  // a seated lease: the thread's seat
};

// Runs `kernel` as a team kernel: leases the team's cores, hands the kernel to one of the
// process's team threads and waits for it (rethrowing what it threw). All teams start from
// these few threads, so there is one OpenMP pool per concurrent team rather than one per
// scheduler thread: an idle pool's threads spin for a while after each team, and a second pool
// spinning beside a running team takes its cores.
void run_as_team(const std::function<void()>& kernel);

// Below this many bytes of input a single-threaded kernel runs without a lease: it is over in
// microseconds, and the lease's lock would cost more than the overlap does.
constexpr std::size_t kLeaseBytes = 64 << 10;

// For single-threaded work on `bytes` of input: a lease of one core, or none below kLeaseBytes.
inline std::optional<CoreLease> lease_one_core_for(std::size_t bytes) {
  if (bytes < kLeaseBytes) return std::nullopt;
  return std::optional<CoreLease>(std::in_place, 1);
}

}  // namespace troupe
