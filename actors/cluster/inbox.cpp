#include "actors/cluster/inbox.hpp"

#include "actors/executor/executable.hpp"

namespace troupe {
namespace {

void fail_step(const Registration& reg, const Tag& tag, ErrorCode code, const std::string& message) {
  caf::anon_send(reg.exe->step_actor(), abort_atom::value, tag, int32_t(code), message);
}

}  // namespace

caf::behavior inbox_actor(caf::stateful_actor<InboxState>* self, std::shared_ptr<MemberContext> context) {
  self->state.context = std::move(context);
  return {
      [self](transfer_atom, RemoteValue& v) {
        auto& s = self->state;
        const uint64_t bytes = v.chunk.bytes.size() + kMessageOverhead;
        if (auto sender = caf::actor_cast<caf::actor>(self->current_sender()))
          self->send(sender, ack_atom::value, bytes);
        s.context->counters.bytes_received.fetch_add(v.chunk.bytes.size(), std::memory_order_relaxed);
        auto reg = s.context->find(v.handle);
        if (!reg) return;  // deregistered: a late value of a signature that is gone
        if (!reg->peer_incarnations.count(v.incarnation)) {
          if (s.refused++ == 0)
            s.context->log(fmt::format("refused a value from incarnation {:#x}, which registration {:#x} does not know "
                                       "(a process restarted); counting such values from now on",
                                       v.incarnation, v.handle));
          return;
        }
        auto recv = reg->recv_of.find(v.key);
        if (recv == reg->recv_of.end()) {
          fail_step(*reg, v.tag, ErrorCode::internal,
                    fmt::format("task {}: a value for rendezvous key {:#x}, which no _Recv of registration {:#x} has",
                                s.context->task.to_string(), v.key, v.handle));
          return;
        }
        if (v.dead) {
          s.context->counters.values_received.fetch_add(1, std::memory_order_relaxed);
          send_input(self->context(), recv->second, v.tag, 0, Value{Tensor(), true});
          return;
        }
        const uint64_t transfer = v.chunk.transfer;
        if (s.aborted.count(v.tag.step)) {  // a late chunk of a failed step
          s.assembler.drop(transfer);
          s.step_of.erase(transfer);
          return;
        }
        std::optional<Tensor> whole;
        try {
          whole = s.assembler.add(v.chunk);
        } catch (const Error& e) {
          s.step_of.erase(transfer);
          fail_step(*reg, v.tag, e.code(), fmt::format("task {}: {}", s.context->task.to_string(), e.what()));
          return;
        }
        if (!whole) {
          s.step_of[transfer] = v.tag.step;
          return;
        }
        s.step_of.erase(transfer);
        s.context->counters.values_received.fetch_add(1, std::memory_order_relaxed);
        send_input(self->context(), recv->second, v.tag, 0, Value{std::move(*whole), false});
      },
      [self](abort_atom, uint64_t step) {  // a failed step's partly received tensors go
        auto& s = self->state;
        if (s.aborted.insert(step).second) {
          s.aborted_order.push_back(step);
          if (s.aborted_order.size() > 1024) {
            s.aborted.erase(s.aborted_order.front());
            s.aborted_order.pop_front();
          }
        }
        for (auto it = s.step_of.begin(); it != s.step_of.end();) {
          if (it->second != step) {
            ++it;
            continue;
          }
          s.assembler.drop(it->first);
          it = s.step_of.erase(it);
        }
      },
  };
}

}  // namespace troupe
