#pragma once
// Worker: the one actor a cluster member (troupe-node) publishes on its task's address; masters
// and peers reach everything else of the process through it (docs/cluster.md, "How a step
// runs"). The member's other actors: inbox.hpp (values from other processes), outbox.hpp
// (values to them); what they share: member_context.hpp.
// Detached (a thread of its own): building a registered graph's actors blocks it, never a
// scheduler thread. What it takes is WorkerActor below: a message missing there does not compile.
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

#include "actors/cluster/cluster_checkpoint.hpp"
#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/data_path.hpp"
#include "actors/cluster/member_context.hpp"

namespace troupe {

// The worker's contract, by concern.
using WorkerActor = caf::typed_actor<
    // Membership and peers
    caf::replies_to<identify_atom>::with<std::string, uint64_t, std::string>,  // task, incarnation, devices
    caf::replies_to<agreement_atom>::with<std::vector<std::string>>,  // the spec as it started
    caf::replies_to<spec_atom>::with<std::vector<std::string>, std::vector<std::string>>,  // tasks, addresses
    // A peer's connection to this member exists (its inbox; `answer`: the reply to this one's
    // hello; its data listener's port, 0 for none, and secret).
    caf::reacts_to<peer_hello_atom, std::string, uint64_t, caf::actor, bool, uint16_t, uint64_t>,
    // A data connection to or from the process of that incarnation broke (why): the peer is lost
    // (and, when `tell`, told so over the cluster connection, which may still be up: from this
    // member's own data connections true, from a peer false).
    caf::reacts_to<peer_lost_atom, uint64_t, std::string, bool>,
    // The hello of that task and incarnation has not come within the connect bound (to itself).
    caf::reacts_to<peer_hello_atom, std::string, uint64_t>,
    caf::replies_to<take_over_atom, std::string>::with<std::string, uint64_t, std::string>,  // a spare's
    caf::reacts_to<moved_atom, std::string, std::string, std::string>,  // task, its address, the spare
    caf::replies_to<inbox_atom>::with<caf::actor>,       // its process's inbox
    // Its all-reduce actor (allreduce.hpp), and its data listener: port (0: none), secret, incarnation.
    caf::replies_to<collective_atom>::with<caf::actor, uint16_t, uint64_t, uint64_t>,
    // Tracing
    caf::replies_to<clock_atom>::with<int64_t>,                  // trace::now_ns()
    caf::replies_to<trace_atom, uint64_t, uint64_t>::with<bool>,  // the session traces (handle, step)
    caf::reacts_to<trace_atom, uint64_t, uint64_t, bool>,        // it ended
    caf::reacts_to<trace_atom, uint64_t, uint64_t, std::vector<int64_t>>,  // the task's own trace ended
    caf::replies_to<trace_atom, uint64_t, std::vector<uint64_t>, int64_t, int64_t, int64_t, int32_t>::with<
        std::vector<std::string>>,  // the events of steps of a handle, in a window, shifted, as pid
    // Steps. A registration connects to the peers it exchanges values with (bounded) and builds
    // the partitions' actors with an outbox per peer it sends to; a run answers the sender
    // (run_done_atom, handle, step, RunGraphReply) once its fetches, targets and root-frame _Sends
    // have reported.
    caf::replies_to<register_atom, RegisterGraph>::with<int32_t, std::string>,
    caf::reacts_to<run_graph_atom, uint64_t, uint64_t, std::vector<WireTensor>>,
    // From a registration's rendezvous: an error after the answer, passed on to the master as a
    // second run_done (handle, tag, code, message, device).
    caf::reacts_to<abort_atom, uint64_t, Tag, int32_t, std::string, std::string>,
    caf::reacts_to<abort_atom, uint64_t, uint64_t, int32_t, std::string>,  // failed elsewhere: drop it
    caf::replies_to<deregister_atom, uint64_t>::with<int32_t, std::string>,  // once the actors are gone
    // State queries
    caf::replies_to<transfer_stats_atom>::with<std::vector<uint64_t>>,  // MemberContext's counters
    caf::replies_to<status_atom>::with<std::vector<StepStatus>>,        // steps running here
    caf::replies_to<step_waits_atom, uint64_t, uint64_t>::with<std::vector<WaitReport>>,
    // Checkpoints (cluster_checkpoint.hpp), each on a thread of its own
    caf::replies_to<save_shards_atom, SaveShards>::with<SaveShardsReply>,
    caf::replies_to<restore_shards_atom, RestoreShards>::with<int32_t, std::string>,
    caf::replies_to<check_dir_atom, std::string, std::string, std::string>::with<int32_t, std::string>>;

struct WorkerState {
  std::shared_ptr<MemberContext> context;
  caf::actor inbox;
  struct Peer {
    WorkerActor worker;  // the peer's worker: connected to, or whose hello came
    // The peer's inbox: the registration's handle until the hello (or its answer) brings one
    // over the connection between the two; monitored once `watched`, and the one outboxes use.
    caf::actor inbox;
    std::string address;
    std::string host;  // of the address
    uint64_t incarnation = 0;
    bool watched = false;  // the connection exists and its hello (or the answer) came
    // The data connection to it (data_path.hpp), once the connection exists, when it has a data
    // listener and the connection could be made; else its values go over CAF. Shared with the
    // outboxes to it; closed when the peer is lost.
    std::shared_ptr<DataSender> data;
    std::vector<caf::actor> waiting;  // outboxes to it that wait for that (peer_hello_atom)
  };
  std::map<std::string, Peer> peers;  // by task ("worker:1")
  // The peers whose hello (or answer) came over their connection to this member, by task.
  struct Connected {
    uint64_t incarnation = 0;
    caf::actor inbox;  // as the hello brought it
    uint16_t data_port = 0;  // its data listener, 0 for none
    uint64_t data_secret = 0;
    WorkerActor worker;  // that sent the hello
  };
  std::map<std::string, Connected> connected;
  // This process's data listener (values from peers' data connections go to the inbox); none
  // when it could not listen. Under TLS, with the task's identity (MemberContext::data_tls).
  std::unique_ptr<DataListener> data;
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

using WorkerSelf = WorkerActor::stateful_pointer<WorkerState>;
WorkerActor::behavior_type worker_actor(WorkerSelf self, std::shared_ptr<MemberContext> context);

// The worker published at `address`, connected within `bound` (CAF's own connect has no bound of
// its own: a peer that accepts and never answers would block forever). Throws unavailable naming
// the address, or failed_precondition when what is published there does not take WorkerActor's
// messages (another program, or another version of Troupe).
WorkerActor connect_member(caf::actor_system& system, const TaskAddress& address, std::chrono::milliseconds bound);

// "worker:1" of "/job:worker/task:1/device:CPU:0"; throws invalid_argument for a name without job and task.
std::string task_of_device(const std::string& device);

}  // namespace troupe
