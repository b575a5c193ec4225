#pragma once
// replica_device_setter (TensorFlow's tf.train.replica_device_setter): a device function for
// between-graph replication. Every variable goes to a task of the ps job, each new one to the
// task holding the fewest bytes so far (its shape's elements times its dtype's size; ties to
// the lowest index: TensorFlow's GreedyLoadBalancingStrategy), and every op on a variable (its
// reads, assignments, optimizer updates, whose slots live beside it) to its variable's task;
// every other op goes to `worker_device`. A request the op has itself (Scope::with_device)
// overrides the setter's field by field (a job, task or device it names stays).
//
//   auto root = Scope::root();
//   auto s = root.with_device_function(replica_device_setter(2));
//   auto w = ops::variable(s.with_op_name("w"), {784, 10}, DType::float32);  // /job:ps/task:0
//   auto b = ops::variable(s.with_op_name("b"), {10}, DType::float32);       // /job:ps/task:1
//   auto y = ops::matmul(s, x, w);                                            // /job:worker
//
// The function keeps the tasks' loads: use one per graph (or per replica's copy of it).
// A local session takes every job and task as its own, so the same graph also runs in one process.
#include <string>

#include "graph/scope.hpp"

namespace troupe {

struct ReplicaDeviceOptions {
  std::string ps_job = "ps";
  std::string worker_device = "/job:worker";  // where every op but the variables' goes
};

// Throws invalid_argument for ps_tasks < 1 or a worker_device that is no device spec.
DeviceFunction replica_device_setter(int ps_tasks, ReplicaDeviceOptions options = {});

}  // namespace troupe
