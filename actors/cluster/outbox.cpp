#include "actors/cluster/outbox.hpp"

#include "core/fingerprint.hpp"
#include "core/trace.hpp"
#include "core/wire/float16.hpp"

namespace troupe {
namespace {

// Hands every queued value, oldest first, to the data connection. One it drops (the connection
// broke) is lost with the peer: the worker fails the steps that exchange values with it.
void pump_data(OutboxState& s) {
  while (!s.queue.empty()) {
    auto& item = s.queue.front();
    ValueHeader h = item.dead ? ValueHeader{} : header_for(item.tensor.dtype(), item.tensor.shape(), item.total);
    h.dead = item.dead;
    h.float16 = item.half != nullptr;
    h.handle = s.handle;
    h.key = s.edges[item.edge].key;
    h.step = item.tag.step;
    h.frame = item.tag.frame;
    h.iteration = item.tag.iteration;
    h.transfer = item.transfer;
    s.context->counters.bytes_sent.fetch_add(h.bytes, std::memory_order_relaxed);
    if (item.traced_since)  // before it goes (see pump)
      trace::record_transfer(true, s.handle, item.tag.step, s.peer, int64_t(item.total), item.transfer,
                             item.traced_since, trace::now());
    if (s.data->send(h, std::move(item.owner), item.bytes))
      s.context->counters.values_direct.fetch_add(1, std::memory_order_relaxed);
    s.queue.pop_front();
  }
}

// Sends what the window allows of the queued values, chunk by chunk, oldest first.
void pump(caf::stateful_actor<OutboxState>* self) {
  auto& s = self->state;
  if (s.ready && s.data) return pump_data(s);
  while (s.ready && !s.queue.empty() && s.unacked < kTransferWindow) {
    auto& item = s.queue.front();
    RemoteValue v;
    v.handle = s.handle;
    v.key = s.edges[item.edge].key;
    v.tag = item.tag;
    v.incarnation = s.context->incarnation;
    v.dead = item.dead;
    uint64_t len = 0;
    if (!item.dead) {
      TensorChunk& c = v.chunk;
      c.transfer = item.transfer;
      c.offset = item.offset;
      c.total = item.total;
      c.dtype = int32_t(item.tensor.dtype());
      c.dims = item.tensor.shape().dims();
      c.encoding = item.half ? TensorChunk::float16 : TensorChunk::raw;
      len = std::min<uint64_t>(kTransferChunk, item.total - item.offset);
      if (len > 0) c.bytes = ChunkBytes(item.owner, item.bytes + item.offset, len);
    }
    s.unacked += len + kMessageOverhead;
    s.context->counters.bytes_sent.fetch_add(len, std::memory_order_relaxed);
    const bool last = item.dead || item.offset + len >= item.total;
    // The send's slice is recorded before its last chunk goes: once it has gone, the receiver
    // may end the step and the session collect this task's trace before a record made after
    // the send (a traced two-process step then lacked one of its sends, under load).
    if (last && item.traced_since)
      trace::record_transfer(true, s.handle, item.tag.step, s.peer, int64_t(item.total), item.transfer,
                             item.traced_since, trace::now());
    self->send(s.inbox, transfer_atom::value, std::move(v));
    item.offset += len;
    if (last) s.queue.pop_front();
  }
}

}  // namespace

caf::behavior outbox_actor(caf::stateful_actor<OutboxState>* self, std::shared_ptr<MemberContext> context,
                           caf::actor inbox, std::shared_ptr<DataSender> data, uint64_t handle, std::string peer,
                           std::vector<OutboxEdge> edges, bool ready) {
  auto& s = self->state;
  s.ready = ready;
  s.context = std::move(context);
  s.inbox = std::move(inbox);
  s.data = std::move(data);
  s.handle = handle;
  s.peer = std::move(peer);
  s.edges = std::move(edges);
  return {
      [self](input_atom, const Tag& tag, uint32_t slot, Value& value) {
        auto& s = self->state;
        OutboxState::Item item;
        item.edge = slot;
        item.tag = tag;
        item.dead = value.dead;
        if (!value.dead) {
          item.tensor = std::move(value.tensor);
          item.transfer = mix64(s.context->incarnation ^ s.context->next_transfer.fetch_add(1));
          if (trace::traced(s.handle, tag.step)) item.traced_since = trace::now();
          if (s.edges[slot].float16 && item.tensor.dtype() == DType::float32) {
            item.half = std::make_shared<std::vector<uint16_t>>(std::size_t(item.tensor.num_elements()));
            float32_to_float16(item.tensor.data<float>(), item.half->data(), item.half->size());
            item.total = item.half->size() * sizeof(uint16_t);
            item.owner = item.half;
            item.bytes = reinterpret_cast<const uint8_t*>(item.half->data());
            s.context->counters.float16_values.fetch_add(1, std::memory_order_relaxed);
            s.context->counters.float16_bytes_saved.fetch_add(item.tensor.byte_size() - item.total, std::memory_order_relaxed);
          } else {
            item.total = item.tensor.byte_size();
            auto held = std::make_shared<Tensor>(item.tensor);
            item.bytes = static_cast<const uint8_t*>(held->raw_data());
            item.owner = std::move(held);
          }
        }
        s.context->counters.values_sent.fetch_add(1, std::memory_order_relaxed);
        s.queue.push_back(std::move(item));
        pump(self);
      },
      // The peer's connection exists now: its inbox's handle over it, and the data connection if any.
      [self](peer_hello_atom, caf::actor& inbox, std::shared_ptr<DataSender>& data) {
        self->state.inbox = std::move(inbox);
        self->state.data = std::move(data);
        self->state.ready = true;
        pump(self);
      },
      [self](ack_atom, uint64_t bytes) {
        auto& s = self->state;
        s.unacked = bytes > s.unacked ? 0 : s.unacked - bytes;
        pump(self);
      },
      [self](abort_atom, uint64_t step) {  // values of a failed step need not cross any more
        auto& q = self->state.queue;
        for (auto it = q.begin(); it != q.end();)
          it = it->tag.step == step && it->offset == 0 ? q.erase(it) : std::next(it);
      },
  };
}

}  // namespace troupe
