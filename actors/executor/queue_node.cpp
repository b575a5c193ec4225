#include "actors/executor/queue_node.hpp"

#include "actors/state/queue_actor.hpp"
#include "actors/timeouts.hpp"
#include "core/trace.hpp"

namespace troupe {
caf::behavior QueueNode::make_behavior() {
  if (state_->queue) {
    monitor(state_->queue);
    set_down_handler([this](caf::down_msg& down) { on_queue_down(down); });
  }
  return NodeActor::make_behavior();
}

void QueueNode::on_exit() {
  if (state_->queue) demonitor(state_->queue.address());  // the queue outlives executables; let it forget this actor
  NodeActor::on_exit();
}

void QueueNode::fire(const Tag& tag, Tensor* inputs, bool dead) {
  if (dead) {
    emit(tag, nullptr, true);
    return;
  }
  request_from_queue(tag, inputs);
}

void QueueNode::request_from_queue(const Tag& tag, Tensor* inputs) {
  auto on_reply = [this, tag](QueueReply& reply) {
    if (is_aborted(tag.step)) return;
    if (reply.code != ErrorCode::ok) {
      report_error(tag, reply.code, reply.message);
      return;
    }
    if (reply.values.size() != outputs_.size()) {
      report_error(
          tag, ErrorCode::internal,
          fmt::format("the queue answered {} value(s) for {} output(s)", reply.values.size(), outputs_.size()));
      return;
    }
    emit(tag, reply.values.data(), false);
  };
  const Node& node = *me_->node;
  // The queue is gone (CAF bounces the request); a request it holds waits for the step's
  // deadline instead (actors/timeouts.hpp).
  auto on_error = [this, tag, queue = get_attr_or<std::string>(node.attrs, "shared_name", "?"),
                   what = node.op](caf::error& e) {
    report_error(tag, ErrorCode::unavailable,
                 fmt::format("queue '{}' did not answer its {} request: {}", queue, what, to_string(e)));
  };
  ++requests_[tag.step];
  // A traced step's wait for the queue's answer (core/trace.hpp).
  const int64_t traced_since = trace_start(tag);
  auto done = [this, step = tag.step, traced_since] {
    auto it = requests_.find(step);
    if (it != requests_.end() && --it->second == 0) requests_.erase(it);
    if (traced_since)
      trace::record_wait(plan_->trace_key, step,
                         fmt::format("{} '{}'", me_->node->op, get_attr_or<std::string>(me_->node->attrs, "shared_name", "?")),
                         traced_since, trace::now());
  };
  auto ask = [&](auto&&... message) {
    request(state_->queue, timeouts::queue_request(), std::forward<decltype(message)>(message)...)
        .then([on_reply, done](QueueReply& r) mutable { done(), on_reply(r); },
              [on_error, done](caf::error& e) mutable { done(), on_error(e); });
  };
  switch (state_->queue_op) {
    case QueueOp::enqueue:
    case QueueOp::enqueue_many: {
      std::vector<Tensor> components(inputs, inputs + me_->num_inputs);
      ask(enqueue_atom::value, tag.step, std::move(components), state_->queue_op == QueueOp::enqueue_many);
      return;
    }
    case QueueOp::dequeue: ask(dequeue_atom::value, tag.step, int64_t(-1), false); return;
    case QueueOp::dequeue_many: {
      const Tensor& n = inputs[0];
      if (n.num_elements() != 1 || n.dtype() != DType::int32 || n.scalar_value<int32_t>() < 0) {
        done();
        report_error(tag, ErrorCode::invalid_argument, "n must be a non-negative int32 scalar, got " + n.describe());
        return;
      }
      ask(dequeue_atom::value, tag.step, int64_t(n.scalar_value<int32_t>()),
          get_attr_or<bool>(node.attrs, "allow_smaller_final_batch", false));
      return;
    }
    case QueueOp::close:
      ask(close_atom::value, get_attr_or<bool>(node.attrs, "cancel_pending_enqueues", false), QueueReply{});
      return;
    case QueueOp::size: ask(size_atom::value); return;
  }
}

void QueueNode::drop_step(uint64_t step) {
  if (requests_.erase(step))  // the queue still holds this step's request: withdraw it
    caf::anon_send(state_->queue, cancel_atom::value, step);
}

void QueueNode::on_queue_down(const caf::down_msg& down) {
  if (down.source != state_->queue.address()) return;
  auto held = std::move(requests_);
  requests_.clear();
  for (auto& [step, count] : held)
    report_error(
        Tag{step, 0, 0}, ErrorCode::unavailable,
        fmt::format("queue '{}' is gone ({}) and will not answer the {} request(s) it held",
                    get_attr_or<std::string>(me_->node->attrs, "shared_name", "?"), to_string(down.reason), count));
}

void QueueNode::add_waits(std::vector<WaitReport>& out) const {
  for (auto& [step, count] : requests_) {
    WaitReport r{me_->node->name, Tag{step, 0, 0}, 0, 1, {}};
    r.missing.push_back(
        fmt::format("queue '{}' to answer ({} request(s): a dequeue waits for elements, an "
                    "enqueue for room)",
                    get_attr_or<std::string>(me_->node->attrs, "shared_name", "?"), count));
    out.push_back(std::move(r));
  }
}

}  // namespace troupe
