#include "actors/cluster/inbox.hpp"

#include "actors/cluster/member_rendezvous.hpp"
#include "actors/executor/executable.hpp"
#include "core/trace.hpp"

namespace troupe {
namespace {

void fail_step(const Registration& reg, const Tag& tag, ErrorCode code, const std::string& message) {
  caf::anon_send(reg.exe->step_actor(), abort_atom::value, tag, int32_t(code), message, std::string());
}

// Forgets the transfers in progress that `which` picks (their partial tensors too).
template <class Which>
void drop_transfers(InboxState& s, Which which) {
  for (auto it = s.in_progress.begin(); it != s.in_progress.end();) {
    if (!which(it->second)) {
      ++it;
      continue;
    }
    s.assembler.drop(it->first);
    s.traced_since.erase(it->first);
    it = s.in_progress.erase(it);
  }
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
        // A value may be the first of its step to reach this task (before the step's run_graph).
        s.context->begin_own_trace(v.handle, v.tag.step);
        const caf::actor* recv = reg->rendezvous->recv_of(v.key);
        if (!recv) {
          fail_step(*reg, v.tag, ErrorCode::internal,
                    fmt::format("task {}: a value for rendezvous key {:#x}, which no _Recv of registration {:#x} has",
                                s.context->task.to_string(), v.key, v.handle));
          return;
        }
        if (v.dead) {
          s.context->counters.values_received.fetch_add(1, std::memory_order_relaxed);
          send_input(self->context(), *recv, v.tag, 0, Value{Tensor(), true});
          return;
        }
        const uint64_t transfer = v.chunk.transfer;
        if (s.aborted.count({v.handle, v.tag.step})) {  // a late chunk of a failed step
          s.assembler.drop(transfer);
          s.in_progress.erase(transfer);
          return;
        }
        if (trace::traced(v.handle, v.tag.step)) s.traced_since.try_emplace(transfer, trace::now());
        std::optional<Tensor> whole;
        try {
          whole = s.assembler.add(v.chunk);
        } catch (const Error& e) {
          s.in_progress.erase(transfer);
          s.traced_since.erase(transfer);
          fail_step(*reg, v.tag, e.code(), fmt::format("task {}: {}", s.context->task.to_string(), e.what()));
          return;
        }
        if (!whole) {
          s.in_progress[transfer] = {{v.handle, v.tag.step}, v.incarnation};
          return;
        }
        s.in_progress.erase(transfer);
        if (auto since = s.traced_since.find(transfer); since != s.traced_since.end()) {
          auto from = reg->task_of.find(v.incarnation);
          trace::record_transfer(false, v.handle, v.tag.step, from == reg->task_of.end() ? "?" : from->second,
                                 int64_t(whole->byte_size()), transfer, since->second, trace::now());
          s.traced_since.erase(since);
        }
        s.context->counters.values_received.fetch_add(1, std::memory_order_relaxed);
        send_input(self->context(), *recv, v.tag, 0, Value{std::move(*whole), false});
      },
      [self](abort_atom, uint64_t handle, uint64_t step) {  // a failed step's partly received tensors go
        auto& s = self->state;
        const InboxState::Step failed{handle, step};
        if (s.aborted.insert(failed).second) {
          s.aborted_order.push_back(failed);
          if (s.aborted_order.size() > 1024) {
            s.aborted.erase(s.aborted_order.front());
            s.aborted_order.pop_front();
          }
        }
        drop_transfers(s, [failed](const InboxState::InProgress& t) { return t.step == failed; });
      },
      [self](peer_lost_atom, uint64_t incarnation) {  // its half-sent tensors will not be finished
        drop_transfers(self->state, [incarnation](const InboxState::InProgress& t) { return t.sender == incarnation; });
      },
  };
}

}  // namespace troupe
