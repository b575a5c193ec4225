#include "actors/cluster/allreduce.hpp"

#include <caf/io/all.hpp>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <thread>

#include "actors/cluster/cluster_messages.hpp"
#include "actors/cluster/data_path.hpp"
#include "actors/cluster/member_context.hpp"
#include "actors/cluster/tensor_transfer.hpp"
#include "actors/cluster/worker.hpp"
#include "actors/runtime.hpp"
#include "core/error.hpp"
#include "core/wire/float16.hpp"

namespace troupe {
namespace {

using ar_data_atom = caf::atom_constant<caf::atom("ardata")>;
using ar_hello_atom = caf::atom_constant<caf::atom("arhello")>;
using ar_ready_atom = caf::atom_constant<caf::atom("arready")>;
using ar_run_atom = caf::atom_constant<caf::atom("arrun")>;
using ar_timeout_atom = caf::atom_constant<caf::atom("artimeout")>;
using ar_bye_atom = caf::atom_constant<caf::atom("arbye")>;
using ar_bye_ack_atom = caf::atom_constant<caf::atom("arbyeack")>;
using ar_broken_atom = caf::atom_constant<caf::atom("arbroken")>;

// What the caller hands its process's ring actor (same process: a pointer; the caller waits).
struct RunRequest {
  std::vector<Tensor>* tensors = nullptr;
};

}  // namespace
}  // namespace troupe

CAF_ALLOW_UNSAFE_MESSAGE_TYPE(troupe::RunRequest)

namespace troupe {
namespace {

int64_t mod(int64_t a, int64_t n) { return ((a % n) + n) % n; }

// One buffer's all-reduce: a tensor reduced where it lies, or several fused into one.
struct Op {
  uint64_t id = 0;
  Tensor storage;  // flat, [elements]
  uint8_t* data = nullptr;
  DType dtype = DType::float32;
  std::size_t element_size = 0;
  int64_t elements = 0;
  bool half = false;  // float32 as float16 on the wire
  std::vector<std::pair<Tensor, int64_t>> parts;  // fused: each caller tensor and its element offset
  int64_t received = 0, expected = 0;
};

struct RingState {
  std::shared_ptr<MemberContext> context;
  AllReduceOptions options;
  int size = 1, rank = 0;
  std::vector<std::string> names;  // task per rank, "worker:1 at 127.0.0.1:2222"
  std::vector<std::string> hosts;  // host per rank
  caf::actor next, prev;
  // The data connection to the next process (data_path.hpp), when its hello offered one: chunks
  // go there, else over CAF to `next`.
  std::shared_ptr<DataSender> next_data;
  std::vector<caf::response_promise> ready_waiters;
  // The request being served: its buffers, run one after the other, and its answer.
  std::deque<Op> ops;
  std::optional<caf::response_promise> answer;
  uint64_t next_op = 1;
  uint64_t next_transfer = 1;
  std::map<uint64_t, std::vector<caf::message>> early;  // data of buffers not started here yet
  std::string broken;  // why the group cannot be used any more
  static inline const char* name = "troupe.allreduce";
};
using Ring = caf::stateful_actor<RingState>;

struct Span {
  int64_t begin = 0, end = 0;
};

Span segment(const Op& op, int size, int64_t k) {
  return {op.elements * k / size, op.elements * (k + 1) / size};
}
int64_t chunk_elements(const RingState& s, const Op& op) {
  return std::max<int64_t>(1, int64_t(s.options.chunk_bytes / (op.half ? 2 : op.element_size)));
}
int64_t num_chunks(const RingState& s, const Op& op, int64_t k) {
  Span seg = segment(op, s.size, k);
  const int64_t c = chunk_elements(s, op);
  return (seg.end - seg.begin + c - 1) / c;
}
Span chunk(const RingState& s, const Op& op, int64_t k, int64_t c) {
  Span seg = segment(op, s.size, k);
  const int64_t n = chunk_elements(s, op);
  return {seg.begin + c * n, std::min(seg.end, seg.begin + (c + 1) * n)};
}
// The segment rank r receives at step t: reduce-scatter steps 0..N-2, then all-gather.
int64_t received_segment(const RingState& s, int64_t t) {
  return t < s.size - 1 ? mod(s.rank - t - 1, s.size) : mod(s.rank - (t - (s.size - 1)), s.size);
}

template <class F>
void visit_sum_type(DType dtype, F&& f) {
  switch (dtype) {
    case DType::float32: f(float{}); break;
    case DType::float64: f(double{}); break;
    case DType::int32: f(int32_t{}); break;
    case DType::int64: f(int64_t{}); break;
    default: fail(ErrorCode::invalid_argument, "all-reduce sums float32, float64, int32 and int64 tensors, not {}", name_of(dtype));
  }
}

// Sends step t's chunk c of buffer `id` to the next process: over the data connection when there
// is one (its bytes kept alive until written), else over CAF.
void send_chunk(Ring* self, uint64_t id, int64_t t, int64_t c, TensorChunk&& out) {
  auto& s = self->state;
  if (!s.next_data) {
    self->send(s.next, ar_data_atom::value, id, int32_t(t), int32_t(c), std::move(out));
    return;
  }
  // float16 chunks cross as float16 tensors: the next process reduces them as they are.
  const DType dtype = out.encoding == TensorChunk::float16 ? DType::float16 : DType(out.dtype);
  ValueHeader h = header_for(dtype, Shape{int64_t(out.total / size_of(dtype))}, out.total);
  h.kind = ValueHeader::ring_chunk;
  h.handle = id;
  h.step = uint64_t(t);
  h.frame = uint64_t(c);
  h.transfer = out.transfer;
  auto held = std::make_shared<TensorChunk>(std::move(out));
  const uint8_t* bytes = held->bytes.data();
  s.next_data->send(h, std::move(held), bytes);  // a broken connection fails the group (ar_broken_atom)
}

// Sends elements [span) of `op`'s buffer as step t's chunk c: from the buffer itself (the sender
// does not write those elements again until they have come back around the ring), or a copy
// when `copy` (the segment's final sum, which the caller may change once this process is done).
void send_from_buffer(Ring* self, Op& op, int64_t t, int64_t c, Span span, bool copy) {
  auto& s = self->state;
  const int64_t n = span.end - span.begin;
  TensorChunk out;
  out.transfer = s.next_transfer++;
  out.dtype = int32_t(op.dtype);
  out.dims = {n};
  const uint8_t* from = op.data + std::size_t(span.begin) * op.element_size;
  if (op.half) {
    auto halves = std::shared_ptr<uint16_t[]>(new uint16_t[std::size_t(n)]);
    float32_to_float16(reinterpret_cast<const float*>(from), halves.get(), std::size_t(n));
    out.encoding = TensorChunk::float16;
    out.total = uint64_t(n) * 2;
    out.bytes = ChunkBytes(std::shared_ptr<const void>(halves, halves.get()),
                           reinterpret_cast<const uint8_t*>(halves.get()), out.total);
  } else if (copy) {
    auto bytes = std::shared_ptr<uint8_t[]>(new uint8_t[std::size_t(n) * op.element_size]);
    std::memcpy(bytes.get(), from, std::size_t(n) * op.element_size);
    out.total = uint64_t(n) * op.element_size;
    out.bytes = ChunkBytes(std::shared_ptr<const void>(bytes, bytes.get()), bytes.get(), out.total);
  } else {
    out.total = uint64_t(n) * op.element_size;
    out.bytes = ChunkBytes(std::make_shared<Tensor>(op.storage), from, out.total);
  }
  send_chunk(self, op.id, t, c, std::move(out));
}

void finish_request(Ring* self, int32_t code, std::string message) {
  auto& s = self->state;
  if (s.answer) s.answer->deliver(code, std::move(message));
  s.answer.reset();
  s.ops.clear();
}

void fail_group(Ring* self, std::string why) {
  auto& s = self->state;
  if (s.broken.empty()) s.broken = why;
  finish_request(self, int32_t(ErrorCode::unavailable), s.broken);
}

void handle_data(Ring* self, uint64_t id, int32_t t, int32_t c, TensorChunk& x);
void end_op(Ring* self);

// Starts the buffer at the front of the queue: its first sends, then the data that came early.
void start_op(Ring* self) {
  auto& s = self->state;
  Op& op = s.ops.front();
  const uint64_t id = op.id;
  op.received = 0;
  op.expected = 0;
  for (int64_t t = 0; t < 2 * (s.size - 1); ++t) op.expected += num_chunks(s, op, received_segment(s, t));
  for (int64_t c = 0, n = num_chunks(s, op, s.rank); c < n; ++c)
    send_from_buffer(self, op, 0, c, chunk(s, op, s.rank, c), false);
  self->delayed_send(self, s.options.timeout, ar_timeout_atom::value, id);
  auto started = [&s, id] { return !s.ops.empty() && s.ops.front().id == id; };
  auto early = s.early.find(id);
  if (early != s.early.end()) {
    auto messages = std::move(early->second);
    s.early.erase(early);
    for (auto& m : messages) {
      if (!started()) return;  // finished (the next buffer handles its own early data) or failed
      m.apply({[self](ar_data_atom, uint64_t id, int32_t t, int32_t c, TensorChunk& x) { handle_data(self, id, t, c, x); }});
    }
  }
  if (started() && s.ops.front().expected == 0) end_op(self);  // nothing to receive (a tiny buffer)
}

// The front buffer is done: its fused tensors get their sums; the next starts or the caller is answered.
void end_op(Ring* self) {
  auto& s = self->state;
  Op& op = s.ops.front();
  for (auto& [tensor, offset] : op.parts)
    std::memcpy(tensor.raw_data(), op.data + std::size_t(offset) * op.element_size, tensor.byte_size());
  s.ops.pop_front();
  if (s.ops.empty()) finish_request(self, int32_t(ErrorCode::ok), {});
  else start_op(self);
}

void handle_data(Ring* self, uint64_t id, int32_t t, int32_t c, TensorChunk& x) {
  auto& s = self->state;
  if (!s.broken.empty() && !s.answer) return;
  if (s.ops.empty() || s.ops.front().id != id) {
    if (s.ops.empty() ? id >= s.next_op : id > s.ops.front().id)  // a buffer not started here yet
      s.early[id].push_back(caf::make_message(ar_data_atom::value, id, t, c, std::move(x)));
    return;
  }
  Op& op = s.ops.front();
  if (t >= 0) {
    const int last_step = 2 * (s.size - 1) - 1;
    const int64_t k = received_segment(s, t);
    if (t > last_step || c < 0 || c >= num_chunks(s, op, k)) {
      fail_group(self, fmt::format("all-reduce: {} sent step {} chunk {} of buffer {}, which has no such chunk: the "
                                   "processes were given different tensors",
                                   s.names[std::size_t(mod(s.rank - 1, s.size))], t, c, id));
      return;
    }
    const Span span = chunk(s, op, k, c);
    const int64_t n = span.end - span.begin;
    const std::size_t wire_size = op.half ? 2 : op.element_size;
    if (x.bytes.size() != uint64_t(n) * wire_size || x.dtype != int32_t(op.dtype)) {
      fail_group(self, fmt::format("all-reduce: {} sent {} bytes of {} for a chunk of {} {} elements of buffer {}: the "
                                   "processes were given different tensors",
                                   s.names[std::size_t(mod(s.rank - 1, s.size))], x.bytes.size(),
                                   name_of(DType(x.dtype)), n, name_of(op.dtype), id));
      return;
    }
    uint8_t* into = op.data + std::size_t(span.begin) * op.element_size;
    const bool reducing = t < s.size - 1;
    if (op.half) {
      auto* v = reinterpret_cast<float*>(into);
      const auto* h = reinterpret_cast<const uint16_t*>(x.bytes.data());
      if (reducing) {
        std::vector<float> in(static_cast<std::size_t>(n));
        float16_to_float32(h, in.data(), std::size_t(n));
        for (int64_t i = 0; i < n; ++i) v[i] += in[std::size_t(i)];
      } else {
        float16_to_float32(h, v, std::size_t(n));
      }
    } else if (reducing) {
      visit_sum_type(op.dtype, [&](auto zero) {
        using T = decltype(zero);
        T* v = reinterpret_cast<T*>(into);
        const T* in = reinterpret_cast<const T*>(x.bytes.data());
        for (int64_t i = 0; i < n; ++i) v[i] += in[i];
      });
    } else {
      std::memcpy(into, x.bytes.data(), std::size_t(n) * op.element_size);
    }
    if (t + 1 <= last_step) {
      if (reducing && t == s.size - 2) {
        // The segment's sum is complete here: this process owns it. With float16 its own copy
        // is rounded as every other process's will be.
        if (op.half) {
          std::vector<uint16_t> h(static_cast<std::size_t>(n));
          float32_to_float16(reinterpret_cast<const float*>(into), h.data(), std::size_t(n));
          float16_to_float32(h.data(), reinterpret_cast<float*>(into), std::size_t(n));
        }
        send_from_buffer(self, op, t + 1, c, span, true);
      } else if (reducing) {
        send_from_buffer(self, op, t + 1, c, span, false);
      } else {
        x.transfer = s.next_transfer++;  // handed on as it came: its bytes stay alive with it
        send_chunk(self, id, t + 1, c, std::move(x));
      }
    }
    ++op.received;
  }
  if (op.received == op.expected) end_op(self);
}

void prepare_ops(Ring* self, std::vector<Tensor>& tensors) {
  auto& s = self->state;
  std::size_t i = 0;
  while (i < tensors.size()) {
    Op op;
    op.id = s.next_op++;
    op.dtype = tensors[i].dtype();
    visit_sum_type(op.dtype, [](auto) {});
    op.element_size = size_of(op.dtype);
    op.half = s.options.float16 && op.dtype == DType::float32;
    // Consecutive tensors of the dtype, while they fit in one buffer.
    std::size_t j = i, bytes = 0;
    while (j < tensors.size() && tensors[j].dtype() == op.dtype &&
           (j == i || bytes + tensors[j].byte_size() <= s.options.fusion_bytes)) {
      bytes += tensors[j].byte_size();
      ++j;
    }
    for (std::size_t k = i; k < j; ++k)
      TROUPE_CHECK_ARG(tensors[k].is_initialized() && tensors[k].host_accessible(),
                       "all-reduce: tensor {} is {}: give host tensors", k,
                       tensors[k].is_initialized() ? tensors[k].describe() : std::string("empty"));
    op.elements = int64_t(bytes / op.element_size);
    if (j == i + 1) {
      op.storage = tensors[i].reshaped(Shape{op.elements});  // in place
    } else {
      op.storage = Tensor(op.dtype, Shape{op.elements});
      int64_t offset = 0;
      for (std::size_t k = i; k < j; ++k) {
        std::memcpy(static_cast<uint8_t*>(op.storage.raw_data()) + std::size_t(offset) * op.element_size,
                    tensors[k].raw_data(), tensors[k].byte_size());
        op.parts.push_back({tensors[k], offset});
        offset += tensors[k].num_elements();
      }
    }
    op.data = static_cast<uint8_t*>(op.storage.raw_data());
    s.ops.push_back(std::move(op));
    i = j;
  }
}

// -- ring membership --

void on_neighbour_down(Ring* self, caf::down_msg& dm) {
  auto& s = self->state;
  const bool next = s.next && dm.source == s.next.address(), prev = s.prev && dm.source == s.prev.address();
  if (!next && !prev) return;
  const int64_t who = next ? mod(s.rank + 1, s.size) : mod(s.rank - 1, s.size);
  const std::string why =
      fmt::format("all-reduce: the ring lost {} ({})", s.names[std::size_t(who)], self->system().render(dm.reason));
  // A neighbour whose group ended normally had received all this one sent (its next had
  // acknowledged its bye, after all it sent), and all it sent came before this message: the
  // all-reduce in flight may still finish. Any later one cannot.
  if (dm.reason == caf::exit_reason::user_shutdown) {
    if (s.broken.empty()) s.broken = why;
    return;
  }
  fail_group(self, why);
}

void notify_ready(Ring* self) {
  auto& s = self->state;
  if (!s.next || !s.prev) return;
  for (auto& w : s.ready_waiters) w.deliver(true);
  s.ready_waiters.clear();
}

// The data connection to the next process, to the listener its hello named (port 0: none; then
// chunks go over CAF). A connection that breaks later fails the group.
void open_next_data(Ring* self, uint16_t port, uint64_t secret, uint64_t incarnation) {
  auto& s = self->state;
  auto ring = caf::actor_cast<caf::weak_actor_ptr>(self);
  auto on_broken = [ring](const std::string& why) {
    if (auto r = caf::actor_cast<caf::actor>(ring.lock())) caf::anon_send(r, ar_broken_atom::value, why);
  };
  const std::size_t next = std::size_t(mod(s.rank + 1, s.size));
  s.next_data = s.context->connect_data(s.hosts[next], port, secret, incarnation, std::move(on_broken),
                                        s.names[next] + ", the all-reduce's next process",
                                        "its all-reduce chunks go over the cluster connection");
}

void on_hello(Ring* self, int32_t from, caf::actor& ring, uint16_t data_port, uint64_t data_secret,
              uint64_t incarnation) {
  auto& s = self->state;
  if (from == mod(s.rank + 1, s.size) && !s.next) {
    s.next = ring;
    self->monitor(ring);
    open_next_data(self, data_port, data_secret, incarnation);
  }
  if (from == mod(s.rank - 1, s.size) && !s.prev) {
    s.prev = ring;
    if (s.prev != s.next) self->monitor(ring);
  }
  notify_ready(self);
}

caf::result<bool> on_ready(Ring* self) {
  auto& s = self->state;
  if (s.next && s.prev) return true;
  s.ready_waiters.push_back(self->make_response_promise());
  return s.ready_waiters.back();
}

// -- runs --

caf::result<int32_t, std::string> on_run(Ring* self, RunRequest& request) {
  auto& s = self->state;
  if (!s.broken.empty()) return {int32_t(ErrorCode::unavailable), s.broken};
  if (s.answer) return {int32_t(ErrorCode::failed_precondition), std::string("all-reduce: one call at a time")};
  try {
    prepare_ops(self, *request.tensors);
  } catch (const Error& e) {
    s.ops.clear();
    return {int32_t(e.code()), std::string(e.what())};
  }
  if (s.ops.empty() || s.size == 1) {
    s.ops.clear();
    return {int32_t(ErrorCode::ok), std::string()};
  }
  s.answer = self->make_response_promise();
  auto promise = *s.answer;
  start_op(self);
  return promise;
}

void on_timeout(Ring* self, uint64_t id) {
  auto& s = self->state;
  if (s.ops.empty() || s.ops.front().id != id) return;
  const Op& op = s.ops.front();
  fail_group(self, fmt::format("all-reduce: buffer {} ({} {} elements) did not get its data from {} within {} ms "
                               "({} of {} chunks came)",
                               id, op.elements, name_of(op.dtype), s.names[std::size_t(mod(s.rank - 1, s.size))],
                               s.options.timeout.count(), op.received, op.expected));
}

// -- leaving --

// The group is going: once the next process acknowledges (it has then received every
// chunk sent before, the connection keeping their order), this process may exit.
caf::result<bool> on_bye(Ring* self) {
  auto& s = self->state;
  if (!s.next || s.size == 1) return true;
  // Chunks on the data connection: once the kernel has them, it delivers them after this
  // process exits too.
  if (s.next_data) s.next_data->flush(std::chrono::seconds(5));
  auto promise = self->make_response_promise();
  self->request(s.next, std::chrono::seconds(5), ar_bye_ack_atom::value)
      .then([promise](bool) mutable { promise.deliver(true); },
            [promise](caf::error&) mutable { promise.deliver(true); });  // gone already: it had them all
  return promise;
}

caf::behavior ring_actor(Ring* self, std::shared_ptr<MemberContext> context, AllReduceOptions options, int size,
                         int rank, std::vector<std::string> names, std::vector<std::string> hosts) {
  auto& s = self->state;
  s.context = std::move(context);
  s.options = options;
  s.size = size;
  s.rank = rank;
  s.names = std::move(names);
  s.hosts = std::move(hosts);
  self->set_down_handler([self](caf::down_msg& dm) { on_neighbour_down(self, dm); });
  return {
      [self](ar_hello_atom, int32_t from, caf::actor& ring, uint16_t port, uint64_t secret, uint64_t incarnation) {
        on_hello(self, from, ring, port, secret, incarnation);
      },
      [self](ar_broken_atom, const std::string& why) {
        fail_group(self, fmt::format("all-reduce: {}", why));
      },
      [self](ar_ready_atom) -> caf::result<bool> { return on_ready(self); },
      [self](ar_run_atom, RunRequest& request) -> caf::result<int32_t, std::string> { return on_run(self, request); },
      [self](ar_data_atom, uint64_t id, int32_t t, int32_t c, TensorChunk& x) { handle_data(self, id, t, c, x); },
      [self](ar_bye_atom) -> caf::result<bool> { return on_bye(self); },
      [](ar_bye_ack_atom) { return true; },
      [self](ar_timeout_atom, uint64_t id) { on_timeout(self, id); },
  };
}

}  // namespace

struct AllReduceGroup::Impl {
  std::shared_ptr<MemberContext> context;
  AllReduceOptions options;
  int size = 1, rank = 0;
  caf::actor ring;
};

AllReduceGroup::AllReduceGroup(ClusterMember& member, std::string job, AllReduceOptions options) : impl_(new Impl) {
  auto& im = *impl_;
  im.context = member.context();
  im.options = options;
  TROUPE_CHECK_ARG(options.chunk_bytes >= 8 && options.fusion_bytes >= 8,
                   "all-reduce: chunk_bytes and fusion_bytes must be at least 8, got {} and {}", options.chunk_bytes,
                   options.fusion_bytes);
  const TaskId me = member.task();
  TROUPE_CHECK_ARG(me.job == job, "all-reduce among job '{}': task {} is not one of its tasks", job, me.to_string());
  std::vector<std::pair<TaskId, TaskAddress>> ring;  // the job's tasks, by index
  for (auto& [task, address] : im.context->cluster)
    if (task.job == job) ring.push_back({task, address});
  std::sort(ring.begin(), ring.end(), [](auto& a, auto& b) { return a.first.index < b.first.index; });
  std::vector<std::string> names, hosts;
  for (std::size_t r = 0; r < ring.size(); ++r) {
    if (ring[r].first == me) im.rank = int(r);
    names.push_back(fmt::format("{} at {}", ring[r].first.to_string(), ring[r].second.to_string()));
    hosts.push_back(ring[r].second.host);
  }
  im.size = int(ring.size());
  auto& system = im.context->runtime->system();
  im.ring = system.spawn<caf::detached>(ring_actor, im.context, options, im.size, im.rank, names, hosts);
  {
    std::lock_guard<std::mutex> lock(im.context->mutex);
    im.context->collective = im.ring;
  }
  if (im.size == 1) return;
  // Each pair of neighbours: the lower index connects, fetches the other's ring actor and says
  // hello; the higher one learns the lower's from that hello.
  const auto deadline = std::chrono::steady_clock::now() + options.timeout;
  caf::scoped_actor self{system};
  for (int neighbour : {(im.rank + 1) % im.size, (im.rank + im.size - 1) % im.size}) {
    if (neighbour <= im.rank) continue;
    caf::actor theirs;
    uint16_t their_port = 0;
    uint64_t their_secret = 0, their_incarnation = 0;
    std::string last_error;
    while (!theirs) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0) {
        anon_send_exit(im.ring, caf::exit_reason::user_shutdown);
        fail(ErrorCode::unavailable, "all-reduce: {} did not join the ring within {} ms: {}", names[std::size_t(neighbour)],
             options.timeout.count(), last_error);
      }
      try {
        WorkerActor worker = connect_member(system, ring[std::size_t(neighbour)].second,
                                           std::min(left, std::chrono::milliseconds(2000)));
        self->request(worker, std::min(left, std::chrono::milliseconds(2000)), collective_atom::value)
            .receive(
                [&](caf::actor& a, uint16_t port, uint64_t secret, uint64_t incarnation) {
                  theirs = a;
                  their_port = port;
                  their_secret = secret;
                  their_incarnation = incarnation;
                },
                [&](caf::error& e) { last_error = system.render(e); });
      } catch (const Error& e) {
        last_error = e.what();
      }
      if (!theirs) std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    auto& ctx = *im.context;
    self->send(theirs, ar_hello_atom::value, int32_t(im.rank), im.ring, ctx.data_port.load(), ctx.data_secret.load(),
               ctx.incarnation);
    self->send(im.ring, ar_hello_atom::value, int32_t(neighbour), theirs, their_port, their_secret, their_incarnation);
  }
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
  bool ready = false;
  self->request(im.ring, std::max(left, std::chrono::milliseconds(1)), ar_ready_atom::value)
      .receive([&](bool) { ready = true; }, [&](caf::error&) {});
  if (!ready) {
    anon_send_exit(im.ring, caf::exit_reason::user_shutdown);
    fail(ErrorCode::unavailable, "all-reduce: {} of {}: the ring's neighbours ({} and {}) did not all join within {} ms",
         names[std::size_t(im.rank)], job, names[std::size_t((im.rank + im.size - 1) % im.size)],
         names[std::size_t((im.rank + 1) % im.size)], options.timeout.count());
  }
}

AllReduceGroup::~AllReduceGroup() {
  {
    // Exiting before the last chunks this process handed on have left would strand its
    // neighbour in the middle of its last all-reduce.
    caf::scoped_actor self{impl_->context->runtime->system()};
    self->request(impl_->ring, std::chrono::seconds(6), ar_bye_atom::value).receive([](bool) {}, [](caf::error&) {});
  }
  {
    std::lock_guard<std::mutex> lock(impl_->context->mutex);
    if (impl_->context->collective == impl_->ring) impl_->context->collective = caf::actor();
  }
  caf::anon_send_exit(impl_->ring, caf::exit_reason::user_shutdown);
}

void deliver_ring_chunk(MemberContext& context, ReceivedValue&& value) {
  caf::actor ring;
  {
    std::lock_guard<std::mutex> lock(context.mutex);
    ring = context.collective;
  }
  if (!ring) return;  // no group (any more): a late chunk
  const bool half = value.tensor.dtype() == DType::float16;
  TensorChunk c = landed_chunk(std::move(value.tensor), value.header.transfer, value.header.bytes);
  if (half) {  // a float32 buffer's chunk as float16 (send_chunk)
    c.dtype = int32_t(DType::float32);
    c.encoding = TensorChunk::float16;
  }
  caf::anon_send(ring, ar_data_atom::value, value.header.handle, int32_t(value.header.step),
                 int32_t(value.header.frame), std::move(c));
}

int AllReduceGroup::size() const { return impl_->size; }
int AllReduceGroup::rank() const { return impl_->rank; }

void AllReduceGroup::all_reduce(std::vector<Tensor>& tensors) {
  auto& system = impl_->context->runtime->system();
  caf::scoped_actor self{system};
  int32_t code = int32_t(ErrorCode::ok);
  std::string message;
  // The ring bounds each buffer's wait; this is a backstop for an actor that never answers.
  const auto bound = impl_->options.timeout * int64_t(tensors.size() + 2);
  self->request(impl_->ring, bound, ar_run_atom::value, RunRequest{&tensors})
      .receive(
          [&](int32_t c, std::string& m) {
            code = c;
            message = std::move(m);
          },
          [&](caf::error& e) {
            code = int32_t(ErrorCode::unavailable);
            message = "all-reduce: the ring actor did not answer: " + system.render(e);
          });
  if (code != int32_t(ErrorCode::ok)) fail(ErrorCode(code), "{}", message);
}

}  // namespace troupe
