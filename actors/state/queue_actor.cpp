#include "actors/state/queue_actor.hpp"

#include <deque>
#include <random>

namespace troupe {
namespace {

struct QueueState {
  struct Enqueue {
    caf::typed_response_promise<QueueReply> promise;
    uint64_t step;
    std::deque<std::vector<Tensor>> elements;  // those not in the queue yet
  };
  struct Dequeue {
    caf::typed_response_promise<QueueReply> promise;
    uint64_t step;
    int64_t n;  // < 0: one element, not stacked
    bool allow_smaller;
  };
  QueueSpec spec;
  std::deque<std::vector<Tensor>> elements;  // in arrival order
  std::deque<Enqueue> enqueues;
  std::deque<Dequeue> dequeues;
  bool closed = false;
  QueueReply failure;  // why the queue was closed, when its producer failed (code != ok)
  std::mt19937_64 rng;
  static inline const char* name = "troupe.queue";

  std::size_t size() const { return elements.size(); }
  bool full() const { return spec.capacity >= 0 && int64_t(size()) >= spec.capacity; }
  // Elements a dequeue may take now: a shuffling queue keeps min_after_dequeue back until closed.
  int64_t available() const {
    int64_t keep = spec.kind == QueueKind::random_shuffle && !closed ? spec.min_after_dequeue : 0;
    return std::max<int64_t>(int64_t(size()) - keep, 0);
  }
  std::vector<Tensor> take() {
    if (spec.kind == QueueKind::random_shuffle) {
      std::uniform_int_distribution<std::size_t> pick(0, elements.size() - 1);
      std::swap(elements[pick(rng)], elements.front());
    }
    std::vector<Tensor> e = std::move(elements.front());
    elements.pop_front();
    return e;
  }
  QueueReply closed_error(int64_t wanted) const {
    if (failure.code != ErrorCode::ok) return failure;
    return {{}, ErrorCode::out_of_range,
            fmt::format("queue '{}' is closed and has {} element(s), fewer than the {} requested", spec.name, size(),
                        std::max<int64_t>(wanted, 1))};
  }

  // Serves what can be served, in arrival order, until nothing moves.
  void pump() {
    for (bool moved = true; moved;) {
      moved = false;
      while (!dequeues.empty()) {
        Dequeue& d = dequeues.front();
        const int64_t want = std::max<int64_t>(d.n, 1);
        QueueReply reply;
        if (available() >= want) {
          reply = serve(d.n, want);
        } else if (closed && failure.code == ErrorCode::ok && d.allow_smaller && d.n >= 0 && size() > 0 &&
                   enqueues.empty()) {
          reply = serve(d.n, int64_t(size()));
        } else if (closed && enqueues.empty()) {
          reply = closed_error(d.n);
        } else {
          break;
        }
        d.promise.deliver(std::move(reply));
        dequeues.pop_front();
        moved = true;
      }
      while (!enqueues.empty() && !full()) {
        Enqueue& e = enqueues.front();
        while (!e.elements.empty() && !full()) {
          elements.push_back(std::move(e.elements.front()));
          e.elements.pop_front();
          moved = true;
        }
        if (!e.elements.empty()) break;
        e.promise.deliver(QueueReply{});
        enqueues.pop_front();
      }
    }
  }
  QueueReply serve(int64_t n, int64_t count) {
    if (n < 0) return {take(), ErrorCode::ok, {}};
    std::vector<std::vector<Tensor>> batch;
    for (int64_t i = 0; i < count; ++i) batch.push_back(take());
    try {
      return {queue_elements::stack(spec, batch), ErrorCode::ok, {}};
    } catch (const Error& e) {
      return {{}, e.code(), e.what()};
    }
  }
};

QueueActor::behavior_type queue_behavior(QueueActor::stateful_pointer<QueueState> self, QueueSpec spec) {
  self->state.rng.seed(spec.seed ? uint64_t(spec.seed) : 87654321u);
  self->state.spec = std::move(spec);
  return {
      [self](enqueue_atom, uint64_t step, std::vector<Tensor>& components, bool many) -> caf::result<QueueReply> {
        auto& st = self->state;
        std::deque<std::vector<Tensor>> elements;
        try {
          if (many) {
            for (auto& e : queue_elements::split(st.spec, components)) elements.push_back(std::move(e));
          } else {
            queue_elements::check(st.spec, components);
            elements.push_back(std::move(components));
          }
        } catch (const Error& e) {
          return QueueReply{{}, e.code(), e.what()};
        }
        if (st.closed) return QueueReply{{}, ErrorCode::cancelled, fmt::format("queue '{}' is closed", st.spec.name)};
        st.enqueues.push_back({self->make_response_promise<QueueReply>(), step, std::move(elements)});
        auto promise = st.enqueues.back().promise;
        st.pump();
        return promise;
      },
      [self](dequeue_atom, uint64_t step, int64_t n, bool allow_smaller) -> caf::result<QueueReply> {
        auto& st = self->state;
        if (n == 0) return QueueReply{queue_elements::stack(st.spec, {}), ErrorCode::ok, {}};
        st.dequeues.push_back({self->make_response_promise<QueueReply>(), step, n, allow_smaller});
        auto promise = st.dequeues.back().promise;
        st.pump();
        return promise;
      },
      [self](close_atom, bool cancel_pending_enqueues, QueueReply& failure) -> QueueReply {
        auto& st = self->state;
        if (!st.closed) st.failure = std::move(failure);
        st.closed = true;
        if (cancel_pending_enqueues) {
          for (auto& e : st.enqueues)
            e.promise.deliver(QueueReply{{}, ErrorCode::cancelled,
                                         fmt::format("queue '{}' was closed with its pending enqueues cancelled",
                                                     st.spec.name)});
          st.enqueues.clear();
        }
        st.pump();
        return QueueReply{};
      },
      [self](size_atom) -> QueueReply {
        return QueueReply{{Tensor::scalar<int32_t>(int32_t(self->state.size()))}, ErrorCode::ok, {}};
      },
      [self](cancel_atom, uint64_t step) {
        auto& st = self->state;
        QueueReply aborted{{}, ErrorCode::cancelled, "the step was aborted"};
        for (auto it = st.dequeues.begin(); it != st.dequeues.end();)
          if (it->step == step) it->promise.deliver(aborted), it = st.dequeues.erase(it);
          else ++it;
        for (auto it = st.enqueues.begin(); it != st.enqueues.end();)
          if (it->step == step) it->promise.deliver(aborted), it = st.enqueues.erase(it);
          else ++it;
        st.pump();
      },
  };
}

}  // namespace

QueueActor spawn_queue(caf::actor_system& system, const QueueSpec& spec) { return system.spawn(queue_behavior, spec); }

}  // namespace troupe
