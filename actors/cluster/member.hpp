#pragma once
// This process as a member of a cluster (what troupe-node runs): the process's runtime with CAF's
// network layer (heartbeats on, so a hung peer is seen), and its worker actor published on the
// task's address from the cluster spec, on that address only (all interfaces only where the spec
// says 0.0.0.0). Destroying it unpublishes the worker and stops it.
//
// The worker runs what masters register with it (actors/cluster/worker.hpp); variables placed on
// the task live in the member's parameter shards for as long as the process runs, shared by
// every session that uses the cluster.
//
// identify_member() asks the member at an address who it is: the first thing a master does with
// each task, and how a test sees that a node is up.
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "actors/cluster/cluster_spec.hpp"
#include "actors/session.hpp"

namespace troupe {

struct MemberContext;

struct MemberOptions {
  int threads = 0;  // 0: the cores this process may use (usable_cores)
  std::chrono::milliseconds heartbeat{200};
  std::chrono::milliseconds connection_timeout{1000};  // a silent peer is gone after this
  int param_shards = 1;  // the parameter shards holding the variables placed on this task
  // The bytes those shards' variables and optimizer slots may take (VariableMemory); 0: no limit.
  int64_t variable_memory_bytes = 0;
  // The task's TLS identity (ClusterSpec::tls_for): every connection mutual TLS, the worker
  // published through CAF's openssl module, a peer without a certificate of the cluster's CA
  // refused and logged. Empty: plain TCP.
  TlsFiles tls;
  // This task's own Chrome trace (troupe-node --trace): its share of every step numbered
  // first_step..last_step by the session that runs it (any session), the file written again
  // after each. Steps a session traces itself go to that session's trace instead.
  TraceOptions trace;
  // One line per event (peer connected, partition registered, peer lost, TLS peer refused); unset: none.
  std::function<void(const std::string&)> log;
};

class ClusterMember {
 public:
  // Throws invalid_argument for a task the spec lacks, unavailable when the address cannot be
  // listened on ("task worker:0 cannot listen on 127.0.0.1:2221: ..." for a port in use).
  ClusterMember(const ClusterSpec& spec, const TaskId& task, const MemberOptions& options = {});
  ~ClusterMember();
  ClusterMember(const ClusterMember&) = delete;
  ClusterMember& operator=(const ClusterMember&) = delete;

  const TaskId& task() const;
  const TaskAddress& address() const;
  uint64_t incarnation() const;
  std::string devices() const;  // its devices' full names under the task (/job:worker/task:0/...), by ','
  // What its actors share (actors/cluster/member_context.hpp): for the runtime's own parts that
  // live beside the worker (AllReduceGroup).
  const std::shared_ptr<MemberContext>& context() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

struct MemberIdentity {
  std::string task;  // "worker:0"
  uint64_t incarnation = 0;
  std::string devices;
};

// Connects to the member at `address` and asks who it is, within `timeout` for the answer.
// With a TLS cluster, `options.tls` is this process's identity (ClusterSpec::tls_client).
// Throws unavailable naming the address when nothing listens there or no answer comes.
MemberIdentity identify_member(const TaskAddress& address, std::chrono::milliseconds timeout,
                               const MemberOptions& options = {});

// What one task of a cluster is running now (troupe-node --status): per step in flight, a line
// naming it (graph, session, how long), then one per node that waits and for what.
struct TaskStatus {
  std::string task;     // "ps:0"
  std::string address;  // "127.0.0.1:2222"
  std::vector<std::string> lines;
  std::string error;    // why it could not be asked; empty when it answered
};
struct ClusterStatus {
  std::vector<TaskStatus> tasks;
  // Per step in flight, its stuck nodes, the waits followed across tasks (actors/trace/wait_chain.hpp):
  // "step 1 of graph 0x.. from session of host1 pid 7: worker:0 'x' waits for 'next:0' from ps:0,
  // where 'next' has 0 of 1 inputs, waits for queue 'held' to answer (...)".
  std::vector<std::string> stuck;
};
// Asks the member at `address` for its cluster spec, then every task of it (at once) for its
// steps, each within `timeout`. Throws unavailable when the member at `address` does not answer.
ClusterStatus cluster_status(const TaskAddress& address, std::chrono::milliseconds timeout,
                             const MemberOptions& options = {});

}  // namespace troupe
