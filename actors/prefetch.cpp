#include "actors/prefetch.hpp"
#include "actors/session_impl.hpp"

#include "actors/state/queue_actor.hpp"
#include "actors/runtime.hpp"
#include "actors/timeouts.hpp"
#include "core/trace.hpp"

#include <algorithm>
#include <deque>

namespace troupe {
namespace {

// The step id a Prefetcher's requests carry: no step has it, so no abort withdraws them.
constexpr uint64_t kPrefetchStep = ~uint64_t(0);

}  // namespace

struct Prefetcher::Impl {
  std::shared_ptr<Runtime> runtime;
  QueueSpec spec;
  QueueActor queue;
  // Waits for the queue's answer to a request on the calling thread; throws its error.
  template <class Handle>
  void await(Handle&& request) {
    QueueReply reply;
    request.receive([&](QueueReply& r) { reply = std::move(r); },
                    [&](caf::error& e) {
                      reply = {{}, ErrorCode::unavailable, "queue actor failed: " + runtime->system().render(e)};
                    });
    if (reply.code != ErrorCode::ok) throw Error(reply.code, reply.message);
  }
  // Closes the queue, handing it `failure` for the dequeues past the last element, and waits
  // for its answer.
  void close(bool cancel_pending_enqueues, QueueReply failure) {
    caf::scoped_actor self{runtime->system()};
    await(self->request(queue, timeouts::queue_close(), close_atom::value, cancel_pending_enqueues, std::move(failure)));
  }
};

Prefetcher::Prefetcher(Session& session, const ops::Queue& queue, data::Pipeline pipeline, data::Position from)
    : impl_(new Impl{runtime_of(session), queue.spec(), {}}) {
  impl_->queue = impl_->runtime->queue(impl_->spec);
  thread_ = std::thread([this, from, pipeline = std::move(pipeline)]() mutable { run(std::move(pipeline), from); });
}

Prefetcher::~Prefetcher() {
  if (!thread_.joinable()) return;
  stop_ = true;
  try {
    impl_->close(true, QueueReply{});  // wakes an enqueue waiting for room
  } catch (...) {
  }
  thread_.join();
}

void Prefetcher::run(data::Pipeline pipeline, data::Position from) {
  try {
    // Up to `window` enqueues travel unanswered, so reading goes on while the queue actor waits
    // for a scheduler thread (a kernel may hold the only one); the queue keeps the elements
    // beyond its capacity as waiting enqueues, so at most capacity + window are read ahead.
    const std::size_t window = std::size_t(std::max<int64_t>(impl_->spec.capacity, 1));
    caf::scoped_actor self{impl_->runtime->system()};
    using Handle = decltype(self->request(impl_->queue, timeouts::prefetch_enqueue(), enqueue_atom::value, kPrefetchStep,
                                          std::vector<Tensor>{}, false));
    std::deque<Handle> in_flight;
    // While a step is traced (core/trace.hpp): the waits for room in the queue and the reading of
    // each element, as events of no step, which a traced step's trace takes while it runs.
    const std::string waits_for_room = fmt::format("input pipeline waits for room in queue '{}'", impl_->spec.name);
    auto settle_one = [&] {
      Handle oldest = std::move(in_flight.front());
      in_flight.pop_front();
      const int64_t since = trace::on() ? trace::now() : 0;
      impl_->await(oldest);
      if (since) trace::record_wait(0, 0, waits_for_room, since, trace::now());
      ++elements_;
    };
    static const uint32_t read_name = trace::intern("read element");
    const uint32_t queue_name = trace::intern(impl_->spec.name);
    auto it = pipeline.begin(from);
    while (!stop_) {
      const int64_t since = trace::on() ? trace::now() : 0;
      auto element = it->next();
      if (since) {
        trace::Event e;
        e.ts = since;
        e.dur = trace::now() - since;
        e.name = read_name;
        e.cat = trace::Category::input_pipeline;
        e.detail = queue_name;
        e.row = trace::thread_row();
        trace::record(e);
      }
      if (!element) break;
      in_flight.push_back(
          self->request(impl_->queue, timeouts::prefetch_enqueue(), enqueue_atom::value, kPrefetchStep,
                        std::move(*element), false));
      if (in_flight.size() >= window) settle_one();
    }
    while (!in_flight.empty()) settle_one();
  } catch (...) {
    if (!stop_) error_ = std::current_exception();
  }
  // The end of the input, or of a failed pipeline: then the steps that dequeue past the last
  // element read fail with the pipeline's error, not with the end of the input.
  QueueReply failure;
  if (error_) {
    std::string why;
    failure.code = ErrorCode::internal;
    try {
      std::rethrow_exception(error_);
    } catch (const Error& e) {
      failure.code = e.code();
      why = std::string(": ") + e.what();
    } catch (const std::exception& e) {
      why = std::string(": ") + e.what();
    } catch (...) {
    }
    failure.message = fmt::format("the input pipeline feeding queue '{}' failed{}", impl_->spec.name, why);
  }
  try {
    impl_->close(false, std::move(failure));
  } catch (...) {
  }
}

void Prefetcher::join() {
  if (thread_.joinable()) thread_.join();
  if (error_) std::rethrow_exception(error_);
}

}  // namespace troupe
