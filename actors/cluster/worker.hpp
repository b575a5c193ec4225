#pragma once
// The actors of a cluster member (troupe-node), docs/cluster.md "How a step runs":
//
// worker  the one actor a member publishes on its task's address; peers and masters reach
//         everything else of the process through it. Detached (a thread of its own): building a
//         registered graph's actors blocks it, never a scheduler thread. Takes
//           (identify_atom)                 -> (task, incarnation, devices)
//           (spec_atom)                     -> (tasks, addresses): the cluster spec it runs in
//           (inbox_atom)                    -> its process's inbox
//           (register_atom, RegisterGraph)  -> (code, message): connects to the peers it sends
//                                              to (bounded), checks their incarnations, builds
//                                              the partitions' actors with an outbox per peer
//           (run_graph_atom, handle, step, feeds)  runs the step on its partitions; answers the
//                                              sender (run_done_atom, handle, step, RunGraphReply)
//           (abort_atom, handle, step, code, message)  the step failed elsewhere: drop it here
//           (deregister_atom, handle)       -> (code, message) once the actors are gone
//           (transfer_stats_atom)           -> the process's transfer counters (MemberContext)
//         Keeps the registrations (also read by the inbox) and its connections to peers; it
//         monitors each registering master and each peer, drops a master's registrations when it
//         goes, and logs peers connecting and going.
// inbox   one per process: takes (transfer_atom, RemoteValue) from other members' outboxes,
//         acknowledges each message's bytes to its sender, puts chunks together (allocated once
//         per tensor), and hands each complete value to the _Recv of its key. A value whose
//         sender incarnation the registration does not know (from before a restart) is dropped.
// outbox  one per registration and peer, in the sending process: takes the values of the
//         _Sends whose _Recv is on that peer (as a node would: (input_atom, tag, slot, value), the
//         slot naming the edge) and sends them in chunks of at most kTransferChunk, at most
//         kTransferWindow bytes unacknowledged (CAF's network layer has no back-pressure of its
//         own: it would buffer everything), float32 edges marked so as float16.
// Internal to actors/: includes CAF.
#include <caf/all.hpp>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/cluster_spec.hpp"

namespace troupe {

class Executable;
class ParamShards;
class Runtime;

inline constexpr std::size_t kTransferWindow = std::size_t(64) << 20;

// One signature registered by a master: its actors and how the inbox reaches its _Recvs.
struct Registration {
  uint64_t handle = 0;
  caf::actor owner;
  std::string owner_name;
  std::shared_ptr<Executable> exe;
  std::unordered_map<uint64_t, caf::actor> recv_of;  // fingerprint64(rendezvous key) -> _Recv
  std::unordered_set<uint64_t> peer_incarnations;    // values from any other are refused
  std::vector<caf::actor> outboxes;
  ~Registration();  // stops the outboxes; the executable stops its own actors
};

// What the worker, inbox and outboxes of one member share. The registrations are written by the
// worker and read by the inbox, under `mutex` (held only around the map).
struct MemberContext {
  TaskId task;
  uint64_t incarnation = 0;
  std::string devices;  // full names under the task, by ','
  std::vector<std::pair<TaskId, TaskAddress>> cluster;  // every task of the spec
  std::shared_ptr<Runtime> runtime;
  std::shared_ptr<ParamShards> shards;  // the variables placed on this task
  std::function<void(const std::string&)> log;
  std::chrono::milliseconds connect_timeout{2000};
  std::atomic<uint64_t> next_transfer{1};
  // What crossed to and from this process since it started (all registrations), as the
  // worker's (transfer_stats_atom) answers: values and bytes sent and received (bytes on the
  // wire), values sent as float16 and the bytes that saved.
  struct Counters {
    std::atomic<uint64_t> values_sent{0}, bytes_sent{0}, values_received{0}, bytes_received{0}, float16_values{0},
        float16_bytes_saved{0};
  } counters;

  mutable std::mutex mutex;  // guards registrations
  std::unordered_map<uint64_t, std::shared_ptr<Registration>> registrations;
  std::shared_ptr<Registration> find(uint64_t handle) const;
};

struct WorkerState {
  std::shared_ptr<MemberContext> context;
  caf::actor inbox;
  struct Peer {
    caf::actor worker;  // when this member made the connection
    caf::actor inbox;   // monitored
    uint64_t incarnation = 0;
  };
  std::map<std::string, Peer> peers;  // by task ("worker:1")
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
