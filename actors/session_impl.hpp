#pragma once
// What a Session (session.hpp) does, by where its graph runs, as TensorFlow splits DirectSession
// from GrpcSession:
//   LocalSession    (local_session.cpp)          every partition in this process: one Executable
//                                                 per signature, run by its step actor;
//   ClusterSession  (cluster/cluster_session.cpp) a cluster of troupe-node processes: one
//                                                 signature per run signature, registered with
//                                                 each task and run by the Master.
// The base holds what both share: the graph, the options, the process's runtime and the
// session's parameter shards, the slots that bound the steps in flight, the slow-step watch and
// the trace file. Internal to actors/: the Saver, the prefetcher and tests reach a session's
// runtime, shards and master through the functions at the end.
#include <atomic>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "actors/session.hpp"
#include "core/trace.hpp"

namespace troupe {

class Master;
class ParamShards;
class Runtime;
class SlowStepWatch;
class TraceFile;

class SessionImpl {
 public:
  // A LocalSession, or a ClusterSession when options.target names a cluster.
  static std::unique_ptr<SessionImpl> make(std::shared_ptr<Graph> graph, SessionOptions options);
  virtual ~SessionImpl();

  // One step of the signature (feeds, fetches, targets), validated by the Session.
  virtual StepResult run(const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                         const std::vector<int>& targets, std::vector<Tensor> feed_values,
                         const RunOptions& options) = 0;
  virtual void prepare(const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                       const std::vector<int>& targets) = 0;
  // What this process's node actors wait for, every step (Session::waiting_nodes).
  virtual std::vector<WaitReport> waits_now() const = 0;
  virtual std::string describe_waiting() const = 0;
  virtual Session::LoopState loop_state() const = 0;
  virtual int num_executables() const = 0;
  virtual std::vector<TaskTransfers> transfer_stats() const = 0;
  // The master of a cluster session; null for a local one.
  virtual Master* master() const = 0;

  // Waits for the steps in flight, stops the slow-step watch and writes what is left of the
  // trace: what the Session's destructor does before the implementation goes.
  void close();
  void write_trace();

  std::shared_ptr<Graph> graph;
  SessionOptions options;
  std::shared_ptr<Runtime> runtime;
  std::shared_ptr<ParamShards> shards;
  std::atomic<uint64_t> next_step{1};

  // Guards in_flight (with slot_free) and what the implementations cache by signature. Never
  // held while an executable is built, a step runs or an actor is asked: only around the maps
  // and the counter, taking no other lock.
  mutable std::mutex mutex;
  std::condition_variable slot_free;
  int in_flight = 0;

  // One of the max_steps_in_flight places a step takes, waited for and given back.
  class StepSlot {
   public:
    explicit StepSlot(SessionImpl& im);
    ~StepSlot();
    StepSlot(const StepSlot&) = delete;
    StepSlot& operator=(const StepSlot&) = delete;

   private:
    SessionImpl& im_;
  };

 protected:
  SessionImpl(std::shared_ptr<Graph> graph, SessionOptions options);
  // Starts the slow-step watch (options.slow_step_report), which asks describe_step(); called by
  // the implementation's constructor, once it can answer.
  void start_watch();

  // Reports steps past options.slow_step_report; null when none are.
  std::unique_ptr<SlowStepWatch> watch;
  // What step `step` waits for; `what` is what the step was watched with (an executable, a
  // cluster signature), alive as long as the session.
  virtual std::string describe_step(uint64_t step, const void* what) const = 0;

  // SessionOptions::trace. A traced step that ended (from start to end on this process's clock):
  // the session's slice of it now; its events stay where they were recorded (this process's
  // buffers, the tasks') until the file is written, so that tracing adds little to a step.
  struct TracedStep {
    uint64_t step;
    int64_t start, end;
    uint64_t exe_key;   // a local step's executable; 0 for a cluster step
    const void* where;  // a cluster step's signature; null for a local step
  };
  bool traces(uint64_t step, const RunOptions& options) const;
  void end_traced_step(uint64_t step, trace::Moment start, trace::Moment end, const void* where, uint64_t exe_key);
  // Adds to `events` (and the file's processes) what other processes recorded of `steps`; times
  // relative to `base`.
  virtual void take_remote_trace(const std::vector<TracedStep>& steps, int64_t base, TraceFile& file,
                                 std::vector<std::string>& events) = 0;

 private:
  std::unique_ptr<TraceFile> trace;
  uint64_t trace_key = 0;  // names this session's own events (the step slices) to the tracer
  std::mutex traced_mutex;
  std::vector<TracedStep> traced_steps;  // ended, not yet in the file
};

// The key a run signature's executable (or cluster signature) is cached under.
std::string signature_key(const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                          const std::vector<int>& targets);

// The value cached under `key`, else what build() makes, stored there. Built outside the lock
// (`mutex` guards `cache`): another thread may build the same one; the first stored wins. A losing
// one is destroyed after the lock is released (an executable's destructor stops its actors and
// waits): try_emplace does not move from `built` when the key is there.
template <class T, class Build>
std::shared_ptr<T> cached(std::mutex& mutex, std::map<std::string, std::shared_ptr<T>>& cache, const std::string& key,
                          Build build) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  std::shared_ptr<T> built = build();
  std::lock_guard<std::mutex> lock(mutex);
  return cache.try_emplace(key, std::move(built)).first->second;
}

std::unique_ptr<SessionImpl> make_local_session(std::shared_ptr<Graph> graph, SessionOptions options);
std::unique_ptr<SessionImpl> make_cluster_session(std::shared_ptr<Graph> graph, SessionOptions options);

// A session's insides, for the Saver, the prefetcher and tests.
SessionImpl& session_impl(const Session& session);
inline const std::shared_ptr<Runtime>& runtime_of(const Session& s) { return session_impl(s).runtime; }
inline const std::shared_ptr<ParamShards>& param_shards_of(const Session& s) { return session_impl(s).shards; }
inline Master* cluster_master_of(const Session& s) { return session_impl(s).master(); }

}  // namespace troupe
