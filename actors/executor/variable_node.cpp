#include "actors/executor/variable_node.hpp"

#include <algorithm>
#include <climits>

#include "actors/timeouts.hpp"
#include "core/trace.hpp"
#include "ops/state/optimizer.hpp"
#include "ops/state/variable.hpp"

namespace troupe {

void VariableNode::fire(const Tag& tag, Tensor* inputs, bool dead) {
  if (dead) {
    emit(tag, nullptr, true);
    return;
  }
  try {
    request_from_shard(tag, inputs);
  } catch (const Error& e) {
    report_error(tag, e.code(), e.what());
  }
}

void VariableNode::trace_request(const Tag& tag, int64_t start) const {
  const int64_t end = trace::now();
  trace::Event e = trace_event(tag, start, end);
  e.name = trace::intern(me_->node->op);
  e.cat = trace::Category::variable;
  e.node = trace::intern(me_->node->name);
  e.row = trace::lane_row("parameter shard requests", start, end);
  trace::record(e);
}

template <class... Ts>
void VariableNode::ask_shard(const Tag& tag, const std::string& name, const char* what, Ts&&... message) {
  // The answer, or its error, ends the wait.
  auto answered = [this, step = tag.step] {
    auto it = asked_.find(step);
    if (it != asked_.end()) asked_.erase(it);
  };
  const int64_t traced_since = trace_start(tag);
  auto on_reply = [this, tag, answered, traced_since](ShardReply& reply) {
    answered();
    if (traced_since) trace_request(tag, traced_since);
    if (reply.code != ErrorCode::ok) {
      report_error(tag, reply.code, reply.message);
      return;
    }
    if (is_aborted(tag.step)) return;
    emit(tag, &reply.value, false);
  };
  // The shard is gone (CAF bounces the request) or never answered within its bound.
  auto on_error = [this, tag, what, name, answered](caf::error& e) {
    answered();
    report_error(tag, ErrorCode::unavailable,
                 fmt::format("the parameter shard did not answer the {} of variable '{}': {}", what, name, to_string(e)));
  };
  auto handle = request(state_->shard, timeouts::shard_request(), std::forward<Ts>(message)...);
  asked_.emplace(tag.step, fmt::format("the parameter shard's answer to the {} of variable '{}'", what, name));
  handle.then(on_reply, on_error);
}

void VariableNode::request_from_shard(const Tag& tag, Tensor* inputs) {
  const Node& node = *me_->node;
  const std::string& name = variable_name(node);
  // Every path below asks the shard once (or fails the tag before asking).
  auto rate_of = [](const Tensor& lr) {
    return lr.dtype() == DType::float64 ? lr.scalar_value<double>() : double(lr.scalar_value<float>());
  };
  VariableUpdate update = VariableUpdate::assign;
  switch (state_->variable_op) {
    case VariableOp::apply_gradient:
      ask_shard(tag, name, "optimizer step", apply_atom::value, name, optimizer_spec_of(node), inputs[0],
                rate_of(inputs[1]));
      return;
    case VariableOp::sparse_apply_gradient:
      ask_shard(tag, name, "sparse optimizer step", sparse_apply_atom::value, name, optimizer_spec_of(node), inputs[0],
                inputs[1], rate_of(inputs[2]));
      return;
    case VariableOp::accumulate_gradient:
      ask_shard(tag, name, "gradient accumulation", accumulate_atom::value, name, optimizer_spec_of(node), inputs[0],
                rate_of(inputs[1]), inputs[2].scalar_value<int64_t>(),
                int32_t(get_attr<int64_t>(node.attrs, "replicas_to_aggregate", node.name)));
      return;
    case VariableOp::sync_step: {
      // Waits for the other replicas' votes: as long as the slowest of the first m takes. The
      // shard bounds it (the vote's bound_ms, SyncReplicasOptions::vote_timeout) and names the
      // missing replicas, in its error and in notes for the waits report.
      SyncVote vote{int32_t(get_attr_or<int64_t>(node.attrs, "replica", -1)),
                    int32_t(get_attr_or<int64_t>(node.attrs, "total_replicas", 0)),
                    get_attr_or<std::string>(node.attrs, "replica_task", std::string()),
                    get_attr_or<int64_t>(node.attrs, "vote_timeout_ms", 0), tag.step};
      ask_shard(tag, name, "wait for the next global step (the other replicas' votes)", sync_step_atom::value, name,
                inputs[0].scalar_value<int64_t>(),
                int32_t(get_attr<int64_t>(node.attrs, "replicas_to_aggregate", node.name)), std::move(vote));
      return;
    }
    case VariableOp::sync_stop: ask_shard(tag, name, "stop of the synchronous replicas", sync_stop_atom::value, name); return;
    case VariableOp::sync_aggregate:
      ask_shard(tag, name, "change of the replicas to aggregate", sync_aggregate_atom::value, name,
                int32_t(std::clamp<int64_t>(inputs[0].scalar_value<int64_t>(), 0, INT32_MAX)));
      return;
    case VariableOp::read: ask_shard(tag, name, "read", read_atom::value, name); return;
    case VariableOp::assign: update = VariableUpdate::assign; break;
    case VariableOp::assign_add: update = VariableUpdate::add; break;
    case VariableOp::assign_sub: update = VariableUpdate::sub; break;
  }
  bool validate = get_attr_or<bool>(node.attrs, "validate_shape", true);
  const auto& declared = get_attr<PartialShape>(node.attrs, "shape", node.name);
  if (validate && !declared.compatible_with(inputs[0].shape())) {
    report_error(tag, ErrorCode::invalid_argument,
                 fmt::format("value {} does not fit variable '{}' of shape {}", inputs[0].describe(), name,
                             declared.to_string()));
    return;
  }
  ask_shard(tag, name, "update", update_atom::value, name, int32_t(update), inputs[0], validate);
}

void VariableNode::on_wait_note(uint64_t step, std::string text) {
  auto range = asked_.equal_range(step);
  for (auto it = range.first; it != range.second; ++it) it->second = text;
}

void VariableNode::add_waits(std::vector<WaitReport>& out) const {
  // Its inputs are in (1 of 1): it waits for the shard.
  for (auto& [step, what] : asked_) out.push_back(WaitReport{me_->node->name, Tag{step, 0, 0}, 1, 1, {what}});
}

}  // namespace troupe
