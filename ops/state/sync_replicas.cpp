#include "ops/state/sync_replicas.hpp"

#include "core/device_name.hpp"
#include "graph/gradients.hpp"
#include "ops/all.hpp"

namespace troupe {

SyncReplicasOptimizer::SyncReplicasOptimizer(Optimizer optimizer, SyncReplicasOptions options)
    : optimizer_(std::move(optimizer)), options_(options) {
  TROUPE_CHECK_ARG(options.total_replicas >= 1 && options.replicas_to_aggregate >= 1 &&
                       options.replicas_to_aggregate <= options.total_replicas,
                   "SyncReplicasOptimizer: replicas_to_aggregate must be 1 to total_replicas ({}), got {}",
                   options.total_replicas, options.replicas_to_aggregate);
  TROUPE_CHECK_ARG(options.vote_timeout.count() >= 0, "SyncReplicasOptimizer: vote_timeout must not be negative, got {} ms",
                   options.vote_timeout.count());
  TROUPE_CHECK_ARG(options.replica >= 0 && options.replica < options.total_replicas,
                   "SyncReplicasOptimizer: replica {} is not one of the {} replicas", options.replica,
                   options.total_replicas);
}

SyncTrainOp SyncReplicasOptimizer::minimize(const Scope& scope, Output loss, Output global_step,
                                            std::vector<Output> variables) const {
  variables = Optimizer::variables_to_train(scope.graph(), std::move(variables));
  return apply_gradients(scope, gradients(scope, {loss}, variables), variables, global_step);
}

SyncTrainOp SyncReplicasOptimizer::apply_gradients(const Scope& scope, const std::vector<Output>& grads,
                                                   const std::vector<Output>& variables, Output global_step) const {
  TROUPE_CHECK_ARG(grads.size() == variables.size(), "SyncReplicasOptimizer: {} gradients for {} variables",
                   grads.size(), variables.size());
  TROUPE_CHECK_ARG(global_step && global_step.node()->op == "VariableV2" && global_step.dtype() == DType::int64,
                   "SyncReplicasOptimizer: the global step must be an int64 variable (ops::global_step), got {}",
                   global_step ? global_step.node()->describe() : std::string("nothing"));
  const Scope s = scope.sub("sync_replicas");
  const int64_t m = options_.replicas_to_aggregate;
  SyncTrainOp train;
  // Every replica's counter, so that any replica's graph (the chief's) can read them all.
  for (int k = 0; k < options_.total_replicas; ++k)
    train.dropped_counters.push_back(ops::variable(s.with_op_name(fmt::format("dropped_gradients/replica_{}", k)),
                                                   ops::constant(s, int64_t(0)), {.trainable = false}));
  // The global step this step's gradients are of: its read when the step starts.
  const Output local_step = global_step;
  const Output lr = optimizer_.learning_rate_tensor(s.sub(optimizer_.spec().name()));
  Output dropped;
  train.aggregate = ops::placeholder(s.with_op_name("aggregate"), DType::int64, PartialShape{});
  std::vector<Output> aggregates;
  auto aggregate_at = [&](const Node& v) {
    aggregates.push_back(Output(&s.colocate_with(v).add("SyncReplicasAggregate", {train.aggregate},
                                                        {{"shared_name", variable_name(v)}}, "aggregate_" + v.name)));
  };
  for (std::size_t i = 0; i < variables.size(); ++i) {
    if (!grads[i]) continue;  // the loss does not depend on this variable
    const Node& v = *variables[i].node();
    TROUPE_CHECK_ARG(v.op == "VariableV2", "SyncReplicasOptimizer: {} is not a variable", v.describe());
    const Scope at_variable = s.colocate_with(v);
    const Output rate = lr.dtype() == v.output_types[0] ? lr : ops::cast(at_variable, lr, v.output_types[0]);
    AttrMap attrs = optimizer_.update_attrs(v);
    attrs["replicas_to_aggregate"] = m;
    Output one(&at_variable.add("AccumulateGradient", {grads[i], rate, local_step}, std::move(attrs),
                                "accumulate_" + v.name));
    dropped = dropped ? ops::maximum(s, dropped, one) : one;  // the step's gradient, once
    aggregate_at(v);
  }
  aggregate_at(*global_step.node());
  train.set_aggregate = ops::group(s.with_op_name("set_aggregate"), aggregates);
  TROUPE_CHECK_ARG(dropped, "SyncReplicasOptimizer: no variable receives a gradient");
  train.dropped = dropped;
  auto counted = ops::assign_add(s, train.dropped_counters[std::size_t(options_.replica)], dropped);
  // The replica's task, for the messages that name a missing vote: where its gradients are
  // computed ("/job:worker/task:1" -> "worker:1"), unless the options name it.
  std::string task = options_.replica_task;
  if (task.empty())
    for (auto& g : grads) {
      if (!g) continue;
      const DeviceSpec d = DeviceSpec::parse(g.node()->requested_device);
      if (d.job && d.task) task = fmt::format("{}:{}", *d.job, *d.task);
      break;
    }
  // The vote, once every gradient is in (or dropped) and counted.
  Node& vote = s.colocate_with(*global_step.node())
                   .with_control_dependencies({counted})
                   .add("SyncReplicasStep", {local_step},
                        {{"shared_name", variable_name(*global_step.node())},
                         {"replicas_to_aggregate", m},
                         {"replica", int64_t(options_.replica)},
                         {"total_replicas", int64_t(options_.total_replicas)},
                         {"replica_task", task},
                         {"vote_timeout_ms", int64_t(options_.vote_timeout.count())}},
                        "next_step");
  train.op = &vote;
  train.stop = &s.colocate_with(*global_step.node())
                    .add("SyncReplicasStop", {}, {{"shared_name", variable_name(*global_step.node())}}, "stop");
  train.next_step = Output(&vote);
  return train;
}

}  // namespace troupe
