#pragma once
// Worker: the one actor a cluster member (troupe-node) publishes on its task's address; masters
// and peers reach everything else of the process through it (docs/cluster.md, "How a step
// runs"). The member's other actors: inbox.hpp (values from other processes), outbox.hpp
// (values to them); what they share: member_context.hpp.
// Detached (a thread of its own): building a registered graph's actors blocks it, never a
// scheduler thread. Takes
//   (identify_atom)                 -> (task, incarnation, devices)
//   (spec_atom)                     -> (tasks, addresses): the cluster spec it runs in
//   (inbox_atom)                    -> its process's inbox
//   (register_atom, RegisterGraph)  -> (code, message): connects to the peers it exchanges
//                                      values with (bounded), builds the partitions' actors
//                                      with an outbox per peer it sends to
//   (run_graph_atom, handle, step, feeds)  runs the step on its partitions and answers the sender
//                                      (run_done_atom, handle, step, RunGraphReply) once its
//                                      fetches, targets and root-frame _Sends have reported
//   (abort_atom, handle, step, code, message)  the step failed elsewhere: drop it here
//   (abort_atom, handle, tag, code, message, device)
//                                      from its step actors: an error after the answer,
//                                      passed on to the master as a second run_done
//   (deregister_atom, handle)       -> (code, message) once the actors are gone
//   (transfer_stats_atom)           -> the process's transfer counters (MemberContext)
//   (save_shards_atom, SaveShards)  -> SaveShardsReply: this task's share of a checkpoint,
//   (restore_shards_atom, RestoreShards) -> (code, message)   on a thread of its own
//                                      (cluster_checkpoint.hpp)
// Keeps its connections to peers and who asked for each recent step (WorkerState); the
// registrations are in the MemberContext. worker.cpp has a function per message, grouped by
// concern: membership and peers, tracing, steps, state queries, checkpoints. It monitors each registering master and each peer, drops a master's
// registrations when it goes, and logs peers connecting and going.
// Internal to actors/: includes CAF.
#include <caf/all.hpp>

#include <atomic>
#include <chrono>
#include <deque>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/member_context.hpp"

namespace troupe {

struct WorkerState {
  std::shared_ptr<MemberContext> context;
  caf::actor inbox;
  struct Peer {
    caf::actor worker;  // when this member made the connection
    // The peer's inbox: the registration's handle until the hello (or its answer) brings one
    // over the connection between the two; monitored once `watched`, and the one outboxes use.
    caf::actor inbox;
    std::string address;
    uint64_t incarnation = 0;
    bool watched = false;  // the connection exists and its hello (or the answer) came
    std::vector<caf::actor> waiting;  // outboxes to it that wait for that (peer_hello_atom)
  };
  std::map<std::string, Peer> peers;  // by task ("worker:1")
  // The peers whose hello (or answer) came over their connection to this member, by task.
  struct Connected {
    uint64_t incarnation = 0;
    caf::actor inbox;  // as the hello brought it
  };
  std::map<std::string, Connected> connected;
  std::map<caf::actor_addr, std::string> owners;  // the masters it monitors, by name
  // Steps, by (graph handle, step): who waits for each one's answer (errors that come after the
  // answer go there too), the last 4096 asked for, forgotten oldest first; and the steps
  // running here, since when (what --status reports).
  using StepKey = std::pair<uint64_t, uint64_t>;
  std::map<StepKey, caf::actor> requesters;
  std::deque<StepKey> requested_order;
  std::map<StepKey, std::chrono::steady_clock::time_point> running;
  static inline const char* name = "troupe.worker";
};

caf::behavior worker_actor(caf::stateful_actor<WorkerState>* self, std::shared_ptr<MemberContext> context);

// The worker published at `address`, connected within `bound` (CAF's own connect has no bound of
// its own: a peer that accepts and never answers would block forever). Throws unavailable naming
// the address.
caf::actor connect_member(caf::actor_system& system, const TaskAddress& address, std::chrono::milliseconds bound);

// "worker:1" of "/job:worker/task:1/device:CPU:0"; throws invalid_argument for a name without job and task.
std::string task_of_device(const std::string& device);

}  // namespace troupe
