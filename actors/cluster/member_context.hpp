#pragma once
// What the actors of one cluster member (worker.hpp, inbox.hpp, outbox.hpp) share: the
// member's identity, its runtime and parameter shards, the registered graphs, and its transfer
// counters. The registrations are written by the worker and read by the inbox, under `mutex`
// (held only around the map). Internal to actors/: includes CAF.
#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "actors/cluster/cluster_spec.hpp"
#include "actors/cluster/data_path.hpp"
#include "core/trace.hpp"

namespace troupe {

// What a message costs an outbox's window beyond its payload (its header, roughly).
inline constexpr uint64_t kMessageOverhead = 64;

class Executable;
class MemberRendezvous;
class ParamShards;
class TraceFile;
class Runtime;

// One signature registered by a master: its actors and how the inbox reaches its _Recvs.
struct Registration {
  uint64_t handle = 0;
  caf::actor owner;
  std::string owner_name;
  std::shared_ptr<Executable> exe;
  std::shared_ptr<const MemberRendezvous> rendezvous;  // where the inbox finds its _Recvs
  std::unordered_set<uint64_t> peer_incarnations;    // values from any other are refused
  std::set<std::string> peers;                       // the tasks it exchanges values with
  std::unordered_map<uint64_t, std::string> task_of;  // a peer's incarnation -> its task (traces)
  std::map<std::string, std::string> waits_for;      // per peer task: the values its _Recvs take from it
  std::vector<caf::actor> outboxes;
  std::string broken;  // why it cannot run (a peer's connection was lost); only the worker reads it
  ~Registration();  // stops the outboxes; the executable stops its own actors
};

// What the worker, inbox and outboxes of one member share. The registrations are written by the
// worker and read by the inbox, under `mutex` (held only around the map).
struct MemberContext {
  TaskId task;
  uint64_t incarnation = 0;
  std::string devices;  // full names under the task, by ','
  std::vector<std::pair<TaskId, TaskAddress>> cluster;  // every task of the spec
  std::vector<std::string> agreement;  // the spec as it started (ClusterSpec::agreement), for the spec check
  std::shared_ptr<Runtime> runtime;
  std::shared_ptr<ParamShards> shards;  // the variables placed on this task
  std::function<void(const std::string&)> log;
  std::chrono::milliseconds connect_timeout{2000};
  // Values to and from peers over data connections of their own (data_path.hpp), the listener
  // on `listen_host`; over CAF's where one cannot be made. With `data_tls` (a cluster with TLS)
  // every data connection is mutual TLS with the task's identity.
  std::shared_ptr<const DataTls> data_tls;
  std::string listen_host = "0.0.0.0";
  // The data listener's port (0 until it listens, or none) and secret, as this member's hellos
  // and the all-reduce's name it.
  std::atomic<uint16_t> data_port{0};
  std::atomic<uint64_t> data_secret{0};
  // A data connection to the listener of another member process (`host`:`port`, its `secret`, that
  // process's `incarnation`), made within the connect bound; `on_broken` as DataSender's. Null
  // when it cannot be made, which is logged ("no data connection to `whom` (why): `fallback`").
  std::shared_ptr<DataSender> connect_data(const std::string& host, uint16_t port, uint64_t secret,
                                           uint64_t incarnation, DataSender::Broken on_broken,
                                           const std::string& whom, const std::string& fallback);
  // MemberOptions::trace: the task's own trace file and the steps it takes.
  std::shared_ptr<TraceFile> trace;
  uint64_t trace_first = 0, trace_last = 0;
  // The task's share of step `step` of registration `handle` in its own trace begins with the
  // first of the step's things to reach the task: its run_graph, or a value from another task
  // (a kernel fed only by such values may fire before its run_graph arrives). Begins tracing it
  // if it is in the trace's range and its session does not trace it; returns when it began,
  // nothing if the step is not in the task's own trace.
  std::optional<trace::Moment> begin_own_trace(uint64_t handle, uint64_t step);
  // Its end: returns when it began (nothing if not in the own trace) and forgets it; the caller
  // ends the mark once it has taken the events.
  std::optional<trace::Moment> end_own_trace(uint64_t handle, uint64_t step);
  // The session traces the step itself (its trace_atom came after a value had begun the task's
  // own trace of it): the events go to the session; returns whether the step was marked here.
  bool hand_own_trace_to_session(uint64_t handle, uint64_t step);
  std::atomic<uint64_t> next_transfer{1};
  // What crossed to and from this process since it started (all registrations), as the
  // worker's (transfer_stats_atom) answers: values and bytes sent and received (bytes on the
  // wire), values sent as float16 and the bytes that saved, values sent over data connections.
  struct Counters {
    std::atomic<uint64_t> values_sent{0}, bytes_sent{0}, values_received{0}, bytes_received{0}, float16_values{0},
        float16_bytes_saved{0}, values_direct{0};
  } counters;

  mutable std::mutex mutex;  // guards registrations and collective
  // The process's all-reduce actor (actors/cluster/allreduce.hpp), once it has one: what the
  // worker hands a peer that asks (collective_atom).
  caf::actor collective;
  std::unordered_map<uint64_t, std::shared_ptr<Registration>> registrations;
  std::shared_ptr<Registration> find(uint64_t handle) const;

 private:
  std::mutex own_trace_mutex_;
  std::map<std::pair<uint64_t, uint64_t>, trace::Moment> own_traces_;  // (handle, step) -> its start
};

}  // namespace troupe
