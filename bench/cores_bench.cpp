// What it costs to move a cache line between two CPUs of this process: two threads, each bound
// to one CPU, hand a counter back and forth on a line of its own; reports the round trip (two
// transfers) per batch, median and least. The executor's node actors pay such transfers for
// every message that crosses cores (a mailbox, a value's reference count), so a run's figures
// for work spread over the cores swing with it (docs/performance.md, "The independent loop's
// gain from the second core"). bench/loop_ceiling.sh prints it beside each round.
//   troupe-bench cores [--cpus 0,1] [--rounds N] [--batches B] [--json]
#include <pthread.h>
#include <sched.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "core/error.hpp"

namespace troupe::bench {
namespace {

// Binds the calling thread to `cpu`; false when the process may not run there.
bool bind_to(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  return pthread_setaffinity_np(pthread_self(), sizeof set, &set) == 0;
}

[[noreturn]] void cannot_bind(int cpu) {
  fail(ErrorCode::invalid_argument, "cannot bind a thread to CPU {} (not among the CPUs this process may use)", cpu);
}

// The CPUs this process may run on, in order.
std::vector<int> allowed_cpus() {
  cpu_set_t set;
  CPU_ZERO(&set);
  std::vector<int> out;
  if (sched_getaffinity(0, sizeof set, &set) != 0) return out;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) out.push_back(c);
  return out;
}

}  // namespace

int cores_main(int argc, char** argv) {
  CLI::App app{"troupe-bench cores: a cache line's round trip between two CPUs"};
  std::vector<int> cpus;
  int rounds = 200000, batches = 20;
  bool json = false;
  app.add_option("--cpus", cpus, "the two CPUs (default: the first two this process may use)")->delimiter(',')->expected(2);
  app.add_option("--rounds", rounds, "round trips in all")->check(CLI::Range(1, 1 << 30))->capture_default_str();
  app.add_option("--batches", batches, "timed batches they are split into")->check(CLI::Range(1, 1000))->capture_default_str();
  app.add_flag("--json", json, "one JSON object instead of text");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const std::vector<int> allowed = allowed_cpus();
  if (cpus.empty()) {
    if (allowed.size() < 2) fail(ErrorCode::failed_precondition, "this process may run on {} CPU(s); two are needed", allowed.size());
    cpus = {allowed[0], allowed[1]};
  }
  if (cpus[0] == cpus[1]) fail(ErrorCode::invalid_argument, "--cpus: two different CPUs, not {} twice", cpus[0]);
  for (int c : cpus)
    if (std::find(allowed.begin(), allowed.end(), c) == allowed.end())
      fail(ErrorCode::invalid_argument, "--cpus: this process may not run on CPU {}", c);
  if (!bind_to(cpus[0])) cannot_bind(cpus[0]);
  const int per_batch = std::max(1, rounds / batches);
  // The counter the two threads hand over, alone on its line: this thread writes odd values, the
  // other answers each with the next even one.
  struct alignas(64) Line {
    std::atomic<int64_t> value{0};
  };
  Line line;
  const int64_t last = 2 * int64_t(per_batch) * batches;
  // The other thread's binding: 0 while it tries, 1 bound, -1 refused (the CPU was allowed a
  // moment ago, but the process's CPU set may change meanwhile).
  std::atomic<int> bound{0};
  std::thread other([&] {
    const bool ok = bind_to(cpus[1]);
    bound.store(ok ? 1 : -1);
    if (!ok) return;
    for (int64_t want = 1; want < last; want += 2) {
      while (line.value.load(std::memory_order_acquire) != want) {
      }
      line.value.store(want + 1, std::memory_order_release);
    }
  });
  while (bound.load() == 0) std::this_thread::yield();
  if (bound.load() < 0) {
    other.join();
    cannot_bind(cpus[1]);
  }
  std::vector<double> ns;
  int64_t next = 1;
  for (int b = 0; b < batches; ++b) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < per_batch; ++i, next += 2) {
      line.value.store(next, std::memory_order_release);
      while (line.value.load(std::memory_order_acquire) != next + 1) {
      }
    }
    ns.push_back(std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count() / per_batch);
  }
  other.join();
  std::sort(ns.begin(), ns.end());
  const double median = ns[ns.size() / 2], least = ns.front();
  if (json)
    std::printf("{\"benchmark\":\"cores\",\"cpus\":[%d,%d],\"rounds\":%d,\"round_trip_ns\":%.1f,\"least_ns\":%.1f}\n",
                cpus[0], cpus[1], per_batch * batches, median, least);
  else
    std::printf("a cache line's round trip between CPU %d and CPU %d: %.1f ns (median of %d batches of %d; least %.1f)\n",
                cpus[0], cpus[1], median, batches, per_batch, least);
  return 0;
}

}  // namespace troupe::bench
