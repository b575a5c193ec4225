#include "actors/cluster/worker.hpp"

#include <caf/io/all.hpp>
#include <caf/openssl/manager.hpp>

#include <algorithm>
#include <deque>
#include <thread>

#include "actors/cluster/allreduce.hpp"
#include "actors/cluster/cluster_checkpoint.hpp"
#include "actors/cluster/inbox.hpp"
#include "actors/cluster/member_rendezvous.hpp"
#include "actors/cluster/outbox.hpp"
#include "actors/cluster/tls_watch.hpp"
#include "actors/executor/executable.hpp"
#include "actors/state/param_shard.hpp"
#include "actors/runtime.hpp"
#include "actors/timeouts.hpp"
#include "actors/trace/trace_file.hpp"
#include "core/fingerprint.hpp"
#include "core/trace.hpp"
#include "devices/device.hpp"
#include "core/device_name.hpp"
#include "graph/graph_def.hpp"

namespace troupe {
Registration::~Registration() {
  for (auto& o : outboxes) caf::anon_send_exit(o, caf::exit_reason::user_shutdown);
}

std::shared_ptr<Registration> MemberContext::find(uint64_t handle) const {
  std::lock_guard<std::mutex> lock(mutex);
  auto it = registrations.find(handle);
  return it == registrations.end() ? nullptr : it->second;
}

std::shared_ptr<DataSender> MemberContext::connect_data(const std::string& host, uint16_t port, uint64_t secret,
                                                       uint64_t incarnation, DataSender::Broken on_broken,
                                                       const std::string& whom, const std::string& fallback) {
  if (!port) return nullptr;
  DataHello hello;
  hello.sender = this->incarnation;
  hello.receiver = incarnation;
  hello.secret = secret;
  try {
    return DataSender::connect(host, port, hello, connect_timeout, std::move(on_broken), data_tls.get());
  } catch (const Error& e) {
    log(fmt::format("no data connection to {} ({}): {}", whom, e.what(), fallback));
    return nullptr;
  }
}

std::optional<trace::Moment> MemberContext::begin_own_trace(uint64_t handle, uint64_t step) {
  if (!trace || step < trace_first || step > trace_last) return std::nullopt;
  std::lock_guard<std::mutex> lock(own_trace_mutex_);
  if (auto it = own_traces_.find({handle, step}); it != own_traces_.end()) return it->second;
  if (trace::traced(handle, step) || !trace::begin(handle, step)) return std::nullopt;  // the session's, or no slot
  return own_traces_[{handle, step}] = trace::moment();
}

std::optional<trace::Moment> MemberContext::end_own_trace(uint64_t handle, uint64_t step) {
  if (!trace) return std::nullopt;
  std::lock_guard<std::mutex> lock(own_trace_mutex_);
  auto it = own_traces_.find({handle, step});
  if (it == own_traces_.end()) return std::nullopt;
  const trace::Moment start = it->second;
  own_traces_.erase(it);
  return start;
}

bool MemberContext::hand_own_trace_to_session(uint64_t handle, uint64_t step) {
  if (!trace) return false;
  std::lock_guard<std::mutex> lock(own_trace_mutex_);
  return own_traces_.erase({handle, step}) > 0;
}

std::string task_of_device(const std::string& device) {
  DeviceSpec d = DeviceSpec::parse(device);
  if (!d.job || !d.task) fail(ErrorCode::invalid_argument, "device '{}' names no job and task", device);
  return *d.job + ":" + std::to_string(*d.task);
}

WorkerActor connect_member(caf::actor_system& system, const TaskAddress& address, std::chrono::milliseconds bound) {
  // A connection refused (a member still starting) or dropped in CAF's handshake (the peer's
  // process busy, or connecting to this one at the same moment) is tried again until the bound.
  const auto deadline = std::chrono::steady_clock::now() + bound;
  // With TLS, through the openssl module's middleman: its connections are TLS, the plain one's not.
  const bool tls = system.has_openssl_manager();
  const caf::io::middleman_actor& connector =
      tls ? system.openssl_manager().actor_handle() : system.middleman().actor_handle();
  caf::scoped_actor self{system};
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    WorkerActor out;
    caf::error failed;
    bool theirs = true;  // what is published takes WorkerActor's messages
    self->request(connector, caf::duration{std::max(left, std::chrono::milliseconds(1))},
                  caf::connect_atom::value, address.host, address.port)
        .receive(
            [&](const caf::node_id&, caf::strong_actor_ptr& published, const std::set<std::string>& interface) {
              theirs = system.assignable<WorkerActor>(interface);
              out = caf::actor_cast<WorkerActor>(published);
            },
            [&](caf::error& e) { failed = std::move(e); });
    if (!failed) {
      if (!out) fail(ErrorCode::unavailable, "nothing is published at {}", address.to_string());
      if (!theirs)
        fail(ErrorCode::failed_precondition,
             "what is published at {} is no Troupe cluster member of this version (it takes other messages)",
             address.to_string());
      return out;
    }
    // Only where no connection was left behind: a second one to the same node would make CAF
    // drop both.
    const bool again = failed == caf::sec::cannot_connect_to_node || failed == caf::sec::connection_timeout;
    if (!again || std::chrono::steady_clock::now() + std::chrono::milliseconds(50) >= deadline) {
      // A TLS member drops a peer it does not trust during the handshake (and a plain one drops
      // a TLS peer): say what to look at.
      const char* hint = failed != caf::sec::disconnect_during_handshake ? ""
                         : tls ? " (a member that refuses this process's certificate, e.g. one of another cluster's CA, "
                                 "or a member without TLS, drops it so)"
                               : " (a member of a cluster with TLS drops a peer without its certificate so: give this "
                                 "process the spec's tls files)";
      if (failed == caf::sec::disconnect_during_handshake)
        fail(ErrorCode::unavailable, "the member at {} dropped the connection during the handshake: {}{}",
             address.to_string(), system.render(failed), hint);
      fail(ErrorCode::unavailable, "no cluster member answers at {} within {} ms: {}{}", address.to_string(),
           bound.count(), system.render(failed), hint);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

namespace {

// ---- worker ----------------------------------------------------------------------------


// The member's copy of the spec after a spare took a task over: `task` runs at `address`, and
// the spare `retired` is no task of its own any more.
void move_task(MemberContext& c, const TaskId& task, const TaskAddress& address, const TaskId& retired) {
  for (auto& [t, a] : c.cluster)
    if (t == task) a = address;
  std::erase_if(c.cluster, [&](const auto& entry) { return entry.first == retired; });
}

// The connection to a peer (CAF's own, with the network layer's heartbeats), made once per
// incarnation, by the member of the two whose task sorts first: two members connecting to each
// other at once make CAF drop both connections. Values then go to the peer directly, and its
// loss is seen and logged. Only the middlemen talk here: the peer's worker may itself be busy
// registering, and the master sent its inbox and incarnation.
void watch(WorkerSelf self, WorkerState::Peer& peer) {
  self->monitor(peer.inbox);
  peer.watched = true;
}

// This member's data listener, as its hellos say it: port (0 for none) and secret.
std::pair<uint16_t, uint64_t> data_listener_of(WorkerSelf self) {
  auto& ctx = *self->state.context;
  return {ctx.data_port.load(), ctx.data_secret.load()};
}

// Tells the worker (if it still runs) that a data connection to or from the process of
// `incarnation` broke, from whichever thread saw it; the worker then tells that peer too.
void report_data_loss(const caf::weak_actor_ptr& worker, uint64_t incarnation, const std::string& why) {
  if (auto w = caf::actor_cast<WorkerActor>(worker.lock()))
    caf::anon_send(w, peer_lost_atom::value, incarnation, why, true);
}

// The data connection to `peer`'s listener at `port` (its hello brought port and secret): values
// to it go there from now on. One that cannot be made leaves them to CAF's connection (logged).
void open_data(WorkerSelf self, WorkerState::Peer& peer, uint16_t port, uint64_t secret) {
  if (peer.data) return;
  auto worker = caf::actor_cast<caf::weak_actor_ptr>(self);
  peer.data = self->state.context->connect_data(
      peer.host, port, secret, peer.incarnation,
      [worker, incarnation = peer.incarnation](const std::string& why) { report_data_loss(worker, incarnation, why); },
      "peer at " + peer.address, "its values go over the cluster connection");
}

// The peer's connection to this member exists (its hello or the answer came, or the backstop says
// to go on): watch its inbox, open the data connection its hello offered, and let the outboxes
// that waited for it send.
void connection_exists(WorkerSelf self, WorkerState::Peer& peer, uint16_t data_port, uint64_t data_secret) {
  watch(self, peer);
  open_data(self, peer, data_port, data_secret);
  for (auto& outbox : peer.waiting) send_untyped(self, outbox, peer_hello_atom::value, peer.inbox, peer.data);
  peer.waiting.clear();
}

WorkerState::Peer& peer_of(WorkerSelf self, const TaskPeer& p) {
  auto& s = self->state;
  auto it = s.peers.find(p.task);
  if (it != s.peers.end() && it->second.incarnation == p.incarnation) return it->second;
  const TaskAddress address{p.host, p.port};
  WorkerState::Peer peer;
  peer.inbox = p.inbox;
  peer.incarnation = p.incarnation;
  peer.address = address.to_string();
  peer.host = p.host;
  if (!peer.inbox) fail(ErrorCode::invalid_argument, "the registration names no inbox for task {}", p.task);
  if (s.context->task < parse_task_id(p.task)) {
    try {
      peer.worker = connect_member(self->system(), address, s.context->connect_timeout);
    } catch (const Error& e) {
      fail(e.code(), "cannot reach peer task {} at {}: {}", p.task, address.to_string(), e.what());
    }
    s.context->log(fmt::format("peer connected: {} at {} (incarnation {:#x})", p.task, address.to_string(), peer.incarnation));
    auto [port, secret] = data_listener_of(self);
    self->send(peer.worker, peer_hello_atom::value, s.context->task.to_string(), s.context->incarnation, s.inbox, false,
               port, secret);
  } else if (auto c = s.connected.find(p.task); c != s.connected.end() && c->second.incarnation == p.incarnation) {
    peer.inbox = c->second.inbox;
    peer.worker = c->second.worker;
    watch(self, peer);
    open_data(self, peer, c->second.data_port, c->second.data_secret);
  }
  // Else the hello (or, where this member connected, its answer) says when the connection exists,
  // and brings the inbox handle to use. The registration's handle came through the master's
  // process, before this member had a route of its own to the peer: CAF may have found no route
  // for that proxy and killed it, and whatever is sent to a dead proxy is dropped without a word
  // (a step would hang, every value of that connection gone). A hello that does not come within
  // the connect bound is not waited for any longer (a backstop: the peer is then watched, and
  // values sent, through the registration's handle, and the log says so).
  if (!peer.watched)
    self->delayed_send(self, s.context->connect_timeout, peer_hello_atom::value, p.task, p.incarnation);
  return s.peers[p.task] = std::move(peer);
}

// The partitions of a registration, checked to be this task's, and where the share's feeds,
// fetches and targets are among them; `nodes` counts their nodes.
PartitionSet partitions_of(const RegisterGraph& r, const std::string& me, std::size_t& nodes) {
  PartitionSet set;
  set.fetch_names = r.fetch_names;
  set.num_targets = r.num_targets;
  for (std::size_t i = 0; i < r.arg_parts.size(); ++i) set.args.push_back({r.arg_parts[i], r.arg_nodes[i]});
  for (auto& wp : r.parts) {
    if (task_of_device(wp.device) != me)
      fail(ErrorCode::invalid_argument, "task {} was sent a partition for {}", me, wp.device);
    Partition part{wp.device, graph_from_bytes(wp.graph.data(), wp.graph.size(), "partition " + wp.device)};
    nodes += std::size_t(part.graph->size());
    PartitionSet::Signature sig;
    for (std::size_t k = 0; k < wp.fetch_nodes.size(); ++k)
      sig.fetches.push_back({{wp.fetch_nodes[k], wp.fetch_ports[k]}, wp.fetch_slots[k]});
    sig.targets.assign(wp.targets.begin(), wp.targets.end());
    set.parts.push_back(std::move(part));
    set.signatures.push_back(std::move(sig));
  }
  return set;
}

// The registration's rendezvous: an outbox per peer that a _Send of `set` sends to, the slot
// naming the edge. Notes in `reg` the peers, their incarnations and what this task's _Recvs wait
// for from each (for errors), and connects to every peer (those that only send here too, so that
// their loss is seen and logged).
std::shared_ptr<MemberRendezvous> rendezvous_of(WorkerSelf self, const RegisterGraph& r, const PartitionSet& set,
                                                Registration& reg) {
  auto& ctx = *self->state.context;
  const std::string me = ctx.task.to_string();
  std::map<std::string, const TaskPeer*> peer_by_task;
  for (auto& p : r.peers) {
    peer_by_task[p.task] = &p;
    reg.peers.insert(p.task);
    reg.peer_incarnations.insert(p.incarnation);
    reg.task_of[p.incarnation] = p.task;
  }
  reg.peer_incarnations.insert(ctx.incarnation);
  std::set<std::string> float16(r.float16_keys.begin(), r.float16_keys.end());
  std::map<std::string, std::vector<OutboxEdge>> edges_to;           // by peer task
  std::map<std::string, std::pair<std::string, uint32_t>> slot_of;  // rendezvous key -> (peer task, slot)
  for (auto& part : set.parts)
    for (int id = 0; id < part.graph->size(); ++id) {
      const Node& n = part.graph->node(id);
      if (n.op == "_Recv") {
        const std::string from_device = get_attr<std::string>(n.attrs, "send_device", n.name);
        const std::string from = task_of_device(from_device);
        if (from == me) continue;
        std::string& waits = reg.waits_for[from];
        if (std::count(waits.begin(), waits.end(), '\'') < 16)  // name at most 8 values
          waits += fmt::format("{}'{}' from {}", waits.empty() ? "" : ", ",
                               get_attr<std::string>(n.attrs, "tensor_name", n.name), from_device);
      } else if (n.op == "_Send") {
        const std::string to = task_of_device(get_attr<std::string>(n.attrs, "recv_device", n.name));
        if (to == me) continue;
        const std::string key = rendezvous_key(n);
        auto& edges = edges_to[to];
        slot_of[key] = {to, uint32_t(edges.size())};
        edges.push_back({MemberRendezvous::key_of(key), float16.count(key) > 0});
      }
    }
  std::map<std::string, caf::actor> outbox_of;
  for (auto& [task, edges] : edges_to) {
    auto p = peer_by_task.find(task);
    if (p == peer_by_task.end())
      fail(ErrorCode::invalid_argument, "task {}: a partition sends to {}, which the registration names no address for",
           me, task);
    WorkerState::Peer& peer = peer_of(self, *p->second);
    // Values go out once the peer's connection to this member exists: before, they would travel
    // through the master's process, or nowhere.
    outbox_of[task] =
        self->spawn(outbox_actor, self->state.context, peer.inbox, peer.data, r.handle, task, edges, peer.watched);
    if (!peer.watched) peer.waiting.push_back(outbox_of[task]);
    reg.outboxes.push_back(outbox_of[task]);
  }
  for (auto& p : r.peers) peer_of(self, p);
  auto rendezvous = std::make_shared<MemberRendezvous>(caf::actor_cast<WorkerActor>(self), r.handle);
  for (auto& [key, slot] : slot_of) rendezvous->send_through(key, outbox_of.at(slot.first), slot.second);
  return rendezvous;
}

// This process's device that a partition's device name stands for: the one of the same type and
// index ("/job:worker/task:1/device:CPU:0" -> CPU:0).
const Device* own_device(const std::string& name) {
  const auto at = name.find("/device:");
  if (at == std::string::npos) return nullptr;
  for (const auto& d : DeviceRegistry::instance().devices())
    if (d->name().ends_with(name.substr(at))) return d.get();
  return nullptr;
}

void register_graph(WorkerSelf self, RegisterGraph& r) {
  auto& ctx = *self->state.context;
  const std::string me = ctx.task.to_string();
  if (ctx.find(r.handle)) fail(ErrorCode::already_exists, "task {}: graph handle {:#x} is registered already", me, r.handle);

  auto reg = std::make_shared<Registration>();
  reg->handle = r.handle;
  reg->owner = r.owner_actor;
  reg->owner_name = r.owner;
  std::size_t nodes = 0;
  PartitionSet set = partitions_of(r, me, nodes);
  std::shared_ptr<MemberRendezvous> rendezvous = rendezvous_of(self, r, set, *reg);
  reg->rendezvous = rendezvous;

  ExecutableOptions options;
  options.runtime = ctx.runtime.get();
  options.trace_key = r.handle;  // the master traces its steps by handle (core/trace.hpp)
  options.find_device = own_device;
  options.rendezvous = rendezvous;
  auto shards = ctx.shards;
  reg->exe = std::make_shared<Executable>(self->system(), std::move(set),
                                          [shards](const std::string& v) { return shards->of(v); }, options);

  if (r.owner_actor && self->state.owners.emplace(r.owner_actor.address(), r.owner).second) {
    self->monitor(r.owner_actor);
    ctx.log(fmt::format("peer connected: {}", r.owner));
  }
  {
    std::lock_guard<std::mutex> lock(ctx.mutex);
    ctx.registrations[r.handle] = reg;
  }
  std::string devices;
  for (auto& wp : r.parts) devices += (devices.empty() ? "" : ", ") + wp.device;
  ctx.log(fmt::format("partition registered: graph {:#x} from {}: {} ({} nodes)", r.handle, r.owner, devices, nodes));
}

// Drops registrations (outside the lock: destroying an executable waits for its actors).
void drop(WorkerSelf self, std::vector<uint64_t> handles) {
  auto& ctx = *self->state.context;
  std::vector<std::shared_ptr<Registration>> gone;
  {
    std::lock_guard<std::mutex> lock(ctx.mutex);
    for (uint64_t h : handles) {
      auto it = ctx.registrations.find(h);
      if (it == ctx.registrations.end()) continue;
      gone.push_back(std::move(it->second));
      ctx.registrations.erase(it);
    }
  }
  gone.clear();
}

}  // namespace

namespace {

// Blocking work (a checkpoint's share of this task, cluster_checkpoint.hpp; a wait report) done
// on a thread of its own, `work` delivering the answer to the promise when it is done.
template <class... Reply, class Work>
caf::result<Reply...> on_own_thread(WorkerSelf self, Work work) {
  auto promise = self->make_response_promise<Reply...>();
  self->spawn<caf::detached>([promise, work = std::move(work)](caf::event_based_actor*) mutable { work(promise); });
  return promise;
}

// The nodes of `reg` still waiting in step `step` (a blocking query: on a thread of its own).
std::vector<WaitReport> step_waits(const Registration& reg, uint64_t step, caf::actor_system& system) {
  if (!reg.exe) return {};
  return ask_waits(system, {reg.exe.get()}, timeouts::late_step_report(), step);
}

caf::result<SaveShardsReply> save_shards(WorkerSelf self, SaveShards request) {
  return on_own_thread<SaveShardsReply>(
      self, [context = self->state.context, request = std::move(request)](auto& promise) {
        promise.deliver(save_task_shards(*context, request));
      });
}

caf::result<int32_t, std::string> restore_shards(WorkerSelf self, RestoreShards request) {
  return on_own_thread<int32_t, std::string>(
      self, [context = self->state.context, request = std::move(request)](auto& promise) {
        auto [code, message] = restore_task_shards(*context, request);
        promise.deliver(code, std::move(message));
      });
}

caf::result<int32_t, std::string> check_dir(WorkerSelf self, std::string dir,
                                            std::string probe, std::string chief) {
  return on_own_thread<int32_t, std::string>(self, [context = self->state.context, dir = std::move(dir),
                                                    probe = std::move(probe), chief = std::move(chief)](auto& promise) {
    auto [code, message] = check_task_dir(*context, dir, probe, chief);
    promise.deliver(code, std::move(message));
  });
}

}  // namespace

namespace {


// ---- Membership and peers

// The peer `it` is lost (its connection went: `reason`). The graphs that exchange values with it
// cannot run now: their steps in flight fail, and so do later ones, until the master registers
// them again (it does after such an error), connecting anew. With `tell_peer` (a data
// connection of this member's broke, the cluster connection may be up) the peer is told first,
// so that both sides start over: it would otherwise keep this member as a peer with a dead
// connection, or wait for a hello this member never sends again.
void lose_peer(WorkerSelf self, std::map<std::string, WorkerState::Peer>::iterator it, const std::string& reason,
               bool tell_peer = false) {
  auto& s = self->state;
  if (tell_peer && it->second.worker)
    self->send(it->second.worker, peer_lost_atom::value, s.context->incarnation,
               fmt::format("task {} lost its data connection with it: {}", s.context->task.to_string(), reason), false);
  const std::string why = fmt::format("task {} lost its connection to peer {} at {} ({})", s.context->task.to_string(),
                                      it->first, it->second.address, reason);
  s.context->log(fmt::format("peer lost: {} ({})", it->first, reason));
  if (it->second.data) it->second.data->close();
  self->demonitor(it->second.inbox);
  send_untyped(self, s.inbox, peer_lost_atom::value, it->second.incarnation);
  std::map<uint64_t, std::string> broken;  // registration -> why
  {
    std::lock_guard<std::mutex> lock(s.context->mutex);
    for (auto& [h, reg] : s.context->registrations)
      if (reg->peers.count(it->first)) {
        auto waits = reg->waits_for.find(it->first);
        reg->broken = waits == reg->waits_for.end() ? why : why + "; it waited for " + waits->second;
        broken[h] = reg->broken;
      }
  }
  for (auto& [key, requester] : s.requesters)
    if (broken.count(key.first)) {
      s.running.erase(key);
      send_untyped(self, requester, run_done_atom::value, key.first, key.second,
                 RunGraphReply{int32_t(ErrorCode::unavailable), broken[key.first], {}});
    }
  // Its connection is gone, and so is the inbox handle its hello brought: the next
  // registration waits for a new hello (over the new connection).
  s.connected.erase(it->first);
  s.peers.erase(it);
}

// A peer's inbox or a master went away (down_msg).
void on_down(WorkerSelf self, caf::down_msg& dm) {
  auto& s = self->state;
  for (auto it = s.peers.begin(); it != s.peers.end(); ++it)
    if (it->second.inbox.address() == dm.source) return lose_peer(self, it, self->system().render(dm.reason));
  auto owner = s.owners.find(dm.source);
  if (owner == s.owners.end()) return;
  std::vector<uint64_t> owned;
  {
    std::lock_guard<std::mutex> lock(s.context->mutex);
    for (auto& [h, reg] : s.context->registrations)
      if (reg->owner && reg->owner.address() == dm.source) owned.push_back(h);
  }
  s.context->log(fmt::format("peer lost: {} ({}){}", owner->second, self->system().render(dm.reason),
                             owned.empty() ? "" : fmt::format("; dropping its {} registered graph(s)", owned.size())));
  s.owners.erase(owner);
  drop(self, owned);
}

// A data connection to or from the process of `incarnation` broke: that peer is lost, as if its
// cluster connection had gone (a value may have been lost with it).
void data_lost(WorkerSelf self, uint64_t incarnation, const std::string& why, bool tell_peer) {
  auto& peers = self->state.peers;
  for (auto it = peers.begin(); it != peers.end(); ++it)
    if (it->second.incarnation == incarnation) return lose_peer(self, it, why, tell_peer);
}

// A peer's hello over its connection to this member (or the answer to this member's).
void peer_hello(WorkerSelf self, const std::string& task, uint64_t incarnation, caf::actor& inbox, bool answer,
                uint16_t data_port, uint64_t data_secret) {
  auto& s = self->state;
  s.connected[task] = {incarnation, inbox, data_port, data_secret,
                       caf::actor_cast<WorkerActor>(self->current_sender())};
  // The member that connected learns this inbox over the same connection.
  if (!answer)
    if (auto sender = caf::actor_cast<WorkerActor>(self->current_sender())) {
      auto [port, secret] = data_listener_of(self);
      self->send(sender, peer_hello_atom::value, s.context->task.to_string(), s.context->incarnation, s.inbox, true,
                 port, secret);
    }
  auto it = s.peers.find(task);
  if (it == s.peers.end() || it->second.incarnation != incarnation || it->second.watched) return;
  it->second.inbox = std::move(inbox);
  if (!it->second.worker) it->second.worker = s.connected[task].worker;
  connection_exists(self, it->second, data_port, data_secret);
}

// No hello from a registered peer within the connect timeout: watch it and send without.
void hello_backstop(WorkerSelf self, const std::string& task, uint64_t incarnation) {
  auto& s = self->state;
  auto it = s.peers.find(task);
  if (it == s.peers.end() || it->second.incarnation != incarnation || it->second.watched) return;
  s.context->log(fmt::format("no hello from peer {} within {} ms of its registration: watching it and sending "
                             "to it without",
                             task, s.context->connect_timeout.count()));
  connection_exists(self, it->second, 0, 0);
}

std::pair<std::vector<std::string>, std::vector<std::string>> spec_of(WorkerSelf self) {
  std::vector<std::string> tasks, addresses;
  for (auto& [t, a] : self->state.context->cluster) {
    tasks.push_back(t.to_string());
    addresses.push_back(a.to_string());
  }
  return {std::move(tasks), std::move(addresses)};
}

// A spare becomes a task whose process is gone for good (Master::take_over_with_spare): it
// answers as that task from now on, with its devices under that task's name, and holds nothing
// yet (the chief restores the task's variables from its checkpoint). Once, and only while
// nothing is registered with it. (The inbox and outboxes read the task's name only in messages
// of failed steps; none run here before.)
caf::result<std::string, uint64_t, std::string> take_over(WorkerSelf self, const std::string& task) {
  auto& c = *self->state.context;
  TaskId to;
  try {
    to = parse_task_id(task);
  } catch (const Error& e) {
    return caf::make_error(caf::sec::runtime_error, e.what());
  }
  {
    std::lock_guard<std::mutex> lock(c.mutex);
    if (c.task.job != "spare" || !c.registrations.empty())
      return caf::make_error(caf::sec::runtime_error,
                             fmt::format("task {} cannot take over {}: it is {}", c.task.to_string(), task,
                                         c.task.job != "spare" ? "no spare" : "running graphs already"));
  }
  const std::string from = fmt::format("/job:{}/task:{}/", c.task.job, c.task.index);
  const std::string into = fmt::format("/job:{}/task:{}/", to.job, to.index);
  std::string devices = c.devices;
  for (auto at = devices.find(from); at != std::string::npos; at = devices.find(from, at + into.size()))
    devices.replace(at, from.size(), into);
  c.log(fmt::format("takes over task {}, whose process is gone (devices {})", task, devices));
  const TaskId was = c.task;
  c.task = to;
  c.devices = devices;
  TaskAddress mine;
  for (auto& [t, a] : c.cluster)
    if (t == was) mine = a;
  move_task(c, to, mine, was);
  return {task, c.incarnation, c.devices};
}

// Where a task runs now, and the spare that took it over (no task of its own any more).
void moved(WorkerSelf self, const std::string& task, const std::string& address, const std::string& retired) {
  auto& c = *self->state.context;
  try {
    move_task(c, parse_task_id(task), parse_task_address(address, "a task's new address"), parse_task_id(retired));
    c.log(fmt::format("task {} runs at {} now (spare {} took it over)", task, address, retired));
  } catch (const Error& e) {
    c.log(fmt::format("ignored a move of task {} to {}: {}", task, address, e.what()));
  }
}

// The all-reduce actor of this process, for a peer of its ring (actors/cluster/allreduce.hpp).
caf::result<caf::actor, uint16_t, uint64_t, uint64_t> collective(WorkerSelf self) {
  auto& c = *self->state.context;
  auto [port, secret] = data_listener_of(self);
  std::lock_guard<std::mutex> lock(c.mutex);
  if (!c.collective)
    return caf::make_error(caf::sec::runtime_error, fmt::format("task {} has no all-reduce group (yet)", c.task.to_string()));
  return {c.collective, port, secret, c.incarnation};
}

// ---- Tracing

// The session traces the step: marked once (a value of the step may have begun the task's own
// trace of it already). The answer tells the session the mark is there (master.cpp).
bool trace_mark(WorkerSelf self, uint64_t handle, uint64_t step) {
  if (!self->state.context->hand_own_trace_to_session(handle, step)) trace::begin(handle, step);
  return true;
}

// The task's own trace of a step (troupe-node --trace) once it has ended: start and end of the
// step as ticks, then ns (core/trace.hpp's Moment); written on a thread of its own.
void own_trace_done(WorkerSelf self, uint64_t handle, uint64_t step, const std::vector<int64_t>& times) {
  const int64_t start = times.at(1), end = times.at(3);
  std::shared_ptr<MemberContext> ctx = self->state.context;
  trace::end(handle, step);
  std::string owner = "?";
  if (auto reg = ctx->find(handle)) owner = reg->owner_name;
  trace::Event e;
  e.key = handle;
  e.step = step;
  e.ts = times.at(0);
  e.dur = times.at(2) - times.at(0);
  e.name = trace::intern(fmt::format("step {} of graph {:#x} from {}", step, handle, owner));
  e.cat = trace::Category::step;
  e.row = trace::named_row("RunGraph");
  trace::record(e);
  self->spawn<caf::detached>([ctx, handle, step, start, end](caf::event_based_actor*) {
    ctx->trace->add_steps({step}, trace::take({{handle, step}}, start, end, ctx->trace->base(start), 1));
    try {
      ctx->trace->write();
    } catch (const Error& e) {
      ctx->log(fmt::format("the trace of step {} was not written: {}", step, e.what()));
    }
  });
}

// A session takes its traced steps' events from this task (formatted off the worker's turn).
caf::result<std::vector<std::string>> take_trace(WorkerSelf self, uint64_t handle, const std::vector<uint64_t>& steps,
                                                 int64_t from, int64_t to, int64_t shift, int32_t pid) {
  std::vector<trace::StepId> ids;
  for (uint64_t step : steps) {
    trace::end(handle, step);
    ids.push_back({handle, step});
  }
  return on_own_thread<std::vector<std::string>>(self, [=](auto& promise) {
    promise.deliver(trace::take(ids, from, to, shift, pid));
  });
}

// ---- Steps

caf::result<int32_t, std::string> register_with(WorkerSelf self, RegisterGraph& r) {
  try {
    register_graph(self, r);
    return {int32_t(ErrorCode::ok), std::string()};
  } catch (const Error& e) {
    self->state.context->log(fmt::format("refused graph {:#x} from {}: {}", r.handle, r.owner, e.what()));
    return {int32_t(e.code()), std::string(e.what())};
  }
}

// Runs a step of a registered graph and answers the sender (run_done_atom) when it has ended.
void run_graph(WorkerSelf self, uint64_t handle, uint64_t step, std::vector<WireTensor>& feeds) {
  auto requester = caf::actor_cast<caf::actor>(self->current_sender());
  auto& ctx = *self->state.context;
  self->state.running.emplace(std::pair{handle, step}, std::chrono::steady_clock::now());
  // The task's own trace (troupe-node --trace) takes the steps in its range that their
  // session does not trace itself (begun here or by a value of the step that came first).
  ctx.begin_own_trace(handle, step);
  auto answer = [self, requester, handle, step](RunGraphReply reply) {
    if (auto start = self->state.context->end_own_trace(handle, step)) {
      // Taken a little later: an outbox may still be sending a value of it.
      const trace::Moment end = trace::moment();
      self->delayed_send(self, std::chrono::milliseconds(500), trace_atom::value, handle, step,
                         std::vector<int64_t>{start->ticks, start->ns, end.ticks, end.ns});
    } else if (trace::traced(handle, step)) {
      // A step its session traces stays so a little longer, for the same reason; its
      // events wait for the master to take them.
      self->delayed_send(self, std::chrono::milliseconds(500), trace_atom::value, handle, step, true);
    }
    self->state.running.erase({handle, step});
    send_untyped(self, requester, run_done_atom::value, handle, step, std::move(reply));
  };
  auto reg = ctx.find(handle);
  if (!reg) {
    answer({int32_t(ErrorCode::failed_precondition),
            fmt::format("task {} (incarnation {:#x}) has no graph {:#x} registered: it was restarted or the "
                        "graph dropped",
                        ctx.task.to_string(), ctx.incarnation, handle),
            {}});
    return;
  }
  if (!reg->broken.empty()) {
    answer({int32_t(ErrorCode::unavailable), reg->broken, {}});
    return;
  }
  std::vector<Tensor> values;
  try {
    for (std::size_t i = 0; i < feeds.size(); ++i) values.push_back(from_wire(feeds[i], fmt::format("feed {}", i)));
  } catch (const Error& e) {
    answer({int32_t(e.code()), fmt::format("task {}: {}", ctx.task.to_string(), e.what()), {}});
    return;
  }
  auto& s = self->state;
  if (s.requesters.insert_or_assign({handle, step}, requester).second) s.requested_order.push_back({handle, step});
  if (s.requested_order.size() > 4096) {
    s.requesters.erase(s.requested_order.front());
    s.requested_order.pop_front();
  }
  self->request(reg->exe->step_actor(), timeouts::member_step(), run_atom::value, step, std::move(values))
      .then(
          [answer, weak = std::weak_ptr<Executable>(reg->exe)](StepResult& r) {
            // Weak: the last reference dropped here would stop the executable's actors
            // from inside this actor's handler.
            if (auto exe = weak.lock()) exe->step_ended();
            RunGraphReply out{int32_t(r.code), std::move(r.message), {}, std::move(r.device)};
            for (auto& t : r.fetches) out.fetches.push_back(to_wire(t));
            answer(std::move(out));
          },
          [self, answer](caf::error& e) {
            answer({int32_t(ErrorCode::internal),
                    fmt::format("task {}: its step actor did not answer: {}", self->state.context->task.to_string(),
                                self->system().render(e)),
                    {}});
          });
}

// An error of a step this member has answered already (its step actor's error sink): a second
// run_done to whoever asked.
void error_after_answer(WorkerSelf self, uint64_t handle, const Tag& tag, int32_t code, std::string& message,
                        std::string& device) {
  auto it = self->state.requesters.find({handle, tag.step});
  if (it != self->state.requesters.end())
    send_untyped(self, it->second, run_done_atom::value, handle, tag.step,
               RunGraphReply{code, std::move(message), {}, std::move(device)});
}

// The step failed elsewhere: drop it here (outboxes, inbox, the step's actors).
void abort_step(WorkerSelf self, uint64_t handle, uint64_t step, int32_t code, std::string& message) {
  auto reg = self->state.context->find(handle);
  if (!reg) return;
  for (auto& o : reg->outboxes) send_untyped(self, o, abort_atom::value, step);
  send_untyped(self, self->state.inbox, abort_atom::value, handle, step);
  caf::anon_send(reg->exe->step_actor(), abort_atom::value, Tag{step, 0, 0}, code, message, std::string());
}

// ---- State queries

std::vector<uint64_t> transfer_stats(WorkerSelf self) {
  auto& c = self->state.context->counters;
  return {c.values_sent.load(), c.bytes_sent.load(), c.values_received.load(), c.bytes_received.load(),
          c.float16_values.load(), c.float16_bytes_saved.load(), c.values_direct.load()};
}

// Every step running here and what it waits for (troupe-node --status), off the worker's turn.
caf::result<std::vector<StepStatus>> status(WorkerSelf self) {
  std::vector<std::pair<std::shared_ptr<Registration>, StepStatus>> steps;
  const auto now = std::chrono::steady_clock::now();
  for (auto& [key, since] : self->state.running)
    if (auto reg = self->state.context->find(key.first))
      steps.push_back({reg, StepStatus{reg->handle, reg->owner_name, key.second,
                                       std::chrono::duration<double>(now - since).count(), {}}});
  return on_own_thread<std::vector<StepStatus>>(self, [steps, system = &self->system()](auto& promise) mutable {
    std::vector<StepStatus> out;
    for (auto& [reg, status] : steps) {
      status.waits = step_waits(*reg, status.step, *system);
      out.push_back(std::move(status));
    }
    promise.deliver(std::move(out));
  });
}

caf::result<std::vector<WaitReport>> waits_of(WorkerSelf self, uint64_t handle, uint64_t step) {
  auto reg = self->state.context->find(handle);
  if (!reg || !reg->exe) return std::vector<WaitReport>{};
  return on_own_thread<std::vector<WaitReport>>(self, [reg, step, system = &self->system()](auto& promise) {
    promise.deliver(step_waits(*reg, step, *system));
  });
}

// The member's data listener: values read from a peer's data connection go to the inbox as if
// they had come over CAF's (whole, on the reader's thread); a connection that breaks loses its
// peer. One that cannot listen leaves values to CAF.
void listen_for_data(WorkerSelf self) {
  auto& ctx = *self->state.context;
  auto deliver = [inbox = self->state.inbox, context = self->state.context](ReceivedValue&& r) {
    if (r.header.kind == ValueHeader::ring_chunk) return deliver_ring_chunk(*context, std::move(r));
    RemoteValue v;
    v.handle = r.header.handle;
    v.key = r.header.key;
    v.tag = {r.header.step, r.header.frame, r.header.iteration};
    v.incarnation = r.sender;
    v.dead = r.header.dead;
    if (!v.dead) v.chunk = landed_chunk(std::move(r.tensor), r.header.transfer, r.header.bytes);
    caf::anon_send(inbox, transfer_atom::value, std::move(v));
  };
  auto worker = caf::actor_cast<caf::weak_actor_ptr>(self);
  // A connection closed between values is not reported: its sender closes it only once it has
  // lost this process or is ending, and a report could come after the peer is back (the same
  // incarnation, over a new connection) and lose it again.
  auto lost = [worker](uint64_t sender, const std::string& why, bool clean) {
    if (!clean) report_data_loss(worker, sender, "its data connection to this task ended: " + why);
  };
  // Told as the cluster port's TLS refusals are: once in full, then counted.
  auto refused = [log = ctx.log](const std::string& peer, const std::string& why) {
    if (std::string line = refusal_line("refused a data connection from", peer, why); !line.empty()) log(line);
  };
  try {
    self->state.data = std::make_unique<DataListener>(ctx.listen_host, ctx.incarnation, std::move(deliver),
                                                      std::move(lost), ctx.connect_timeout, ctx.data_tls,
                                                      std::move(refused));
    ctx.data_secret = self->state.data->secret();
    ctx.data_port = self->state.data->port();
  } catch (const Error& e) {
    ctx.log(fmt::format("no data listener ({}): values from peers come over the cluster connections", e.what()));
  }
}

}  // namespace

WorkerActor::behavior_type worker_actor(WorkerSelf self, std::shared_ptr<MemberContext> context) {
  self->state.context = std::move(context);
  self->state.inbox = self->spawn<caf::linked>(inbox_actor, self->state.context);  // goes with the worker
  listen_for_data(self);
  self->set_down_handler([self](caf::down_msg& dm) { on_down(self, dm); });
  auto& ctx = *self->state.context;
  return {
      // Membership and peers
      [&ctx](identify_atom) -> caf::result<std::string, uint64_t, std::string> {
        return {ctx.task.to_string(), ctx.incarnation, ctx.devices};
      },
      [&ctx](agreement_atom) { return ctx.agreement; },
      [self](spec_atom) -> caf::result<std::vector<std::string>, std::vector<std::string>> {
        auto [tasks, addresses] = spec_of(self);
        return {std::move(tasks), std::move(addresses)};
      },
      [self](peer_hello_atom, const std::string& task, uint64_t incarnation, caf::actor& inbox, bool answer,
             uint16_t data_port, uint64_t data_secret) {
        peer_hello(self, task, incarnation, inbox, answer, data_port, data_secret);
      },
      [self](peer_lost_atom, uint64_t incarnation, const std::string& why, bool tell_peer) {
        data_lost(self, incarnation, why, tell_peer);
      },
      [self](peer_hello_atom, const std::string& task, uint64_t incarnation) { hello_backstop(self, task, incarnation); },
      [self](take_over_atom, const std::string& task) { return take_over(self, task); },
      [self](moved_atom, const std::string& task, const std::string& address, const std::string& retired) {
        moved(self, task, address, retired);
      },
      [self](inbox_atom) { return self->state.inbox; },
      [self](collective_atom) { return collective(self); },
      // Tracing
      [](clock_atom) { return trace::now_ns(); },
      [self](trace_atom, uint64_t handle, uint64_t step) { return trace_mark(self, handle, step); },
      [](trace_atom, uint64_t handle, uint64_t step, bool) { trace::end(handle, step); },
      [self](trace_atom, uint64_t handle, uint64_t step, const std::vector<int64_t>& times) {
        own_trace_done(self, handle, step, times);
      },
      [self](trace_atom, uint64_t handle, const std::vector<uint64_t>& steps, int64_t from, int64_t to, int64_t shift,
             int32_t pid) { return take_trace(self, handle, steps, from, to, shift, pid); },
      // Steps
      [self](register_atom, RegisterGraph& r) { return register_with(self, r); },
      [self](run_graph_atom, uint64_t handle, uint64_t step, std::vector<WireTensor>& feeds) {
        run_graph(self, handle, step, feeds);
      },
      [self](abort_atom, uint64_t handle, const Tag& tag, int32_t code, std::string& message, std::string& device) {
        error_after_answer(self, handle, tag, code, message, device);
      },
      [self](abort_atom, uint64_t handle, uint64_t step, int32_t code, std::string& message) {
        abort_step(self, handle, step, code, message);
      },
      [self](deregister_atom, uint64_t handle) -> caf::result<int32_t, std::string> {
        drop(self, {handle});
        return {int32_t(ErrorCode::ok), std::string()};
      },
      // State queries
      [self](transfer_stats_atom) { return transfer_stats(self); },
      [self](status_atom) { return status(self); },
      [self](step_waits_atom, uint64_t handle, uint64_t step) { return waits_of(self, handle, step); },
      // Checkpoints (cluster_checkpoint.hpp), each on a thread of its own
      [self](save_shards_atom, SaveShards& request) { return save_shards(self, std::move(request)); },
      [self](restore_shards_atom, RestoreShards& request) { return restore_shards(self, std::move(request)); },
      [self](check_dir_atom, std::string& dir, std::string& probe, std::string& chief) {
        return check_dir(self, std::move(dir), std::move(probe), std::move(chief));
      },
  };
}

}  // namespace troupe
