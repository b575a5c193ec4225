#pragma once
// Placement: which device runs each node of a graph (TensorFlow's placer.cc). Works on the
// graph alone, so the master of a cluster can place a graph on devices of other processes.
//
// The rules, in the order they apply:
//  1. Requests: a node's requested device (set by Scope::with_device) is a full or partial
//     device spec ("/job:ps/task:1/device:CPU:0", "/job:worker", "/device:GPU:0", "").
//  2. Colocation groups: nodes that must share a device form one group, and the group's
//     request is the merge of its members' requests. Groups come from
//       - the "_class" attribute, a list of "loc:@<node name>" (Scope::colocate_with);
//       - variable ops: every op reading or updating a variable goes where the variable's
//         VariableV2 node goes (same variable name, attr "shared_name" or else the node name);
//       - a loop gradient's stack: the StackPush and StackPop of one "stack_name";
//       - a loop's NextIteration goes with the Merge it feeds (its request yields to the
//         Merge's: the back edge stays on one device).
//     Two requests that disagree (different job, task, type or index) fail with
//     invalid_argument naming both nodes and both requested devices.
//  3. Candidates: the devices matching the group's request on which every member has a kernel
//     (`has_kernel`). None with a kernel: with soft placement the group goes to the CPU devices
//     of the requested job and task (TensorFlow's allow_soft_placement); without it, an error
//     naming the node, the device and the op. No device matching at all: an error naming the
//     node, the request and the devices there are.
//  4. Choice: a group whose request names one device goes there. Otherwise, in topological
//     order, the candidate that costs least: the bytes its inputs would cross from other
//     devices (shape-known inputs count their size, others a fixed estimate), then the
//     default device (the first candidate of the default job, task and device type), then
//     candidate order. A graph without requests so stays on the default device.
//     Policy::alternate (tests; TROUPE_PLACEMENT=alternate) instead hands an unconstrained
//     group the next candidate in turn, node by node, to spread a graph over devices.
#include <functional>
#include <string>
#include <vector>

#include "graph/graph.hpp"

namespace troupe {

struct PlacementOptions {
  // The devices the graph may use, by full name ("/job:J/task:T/device:TYPE:I"), the default
  // device's task first. Must not be empty.
  std::vector<std::string> devices;
  // The job and task an unconstrained node goes to (a request without a job or task means
  // this one), and the default device type there.
  std::string default_job = "localhost";
  int default_task = 0;
  std::string default_type = "CPU";
  // Whether `node` can run on a device of `type` ("CPU", "GPU"). Ops without a kernel that
  // the runtime carries out itself (Merge, Enter, variable and queue ops) answer true.
  std::function<bool(const Node& node, const std::string& type)> has_kernel;
  bool allow_soft_placement = true;
  enum class Policy { cost, alternate };
  Policy policy = Policy::cost;
};

// The device of every node of `graph` (indexed by node id), by full name. Throws
// invalid_argument as described above.
std::vector<std::string> place(const Graph& graph, const PlacementOptions& options);

// The policy named by TROUPE_PLACEMENT ("cost" or unset, "alternate"); throws invalid_argument
// for any other value.
PlacementOptions::Policy placement_policy_from_environment();

}  // namespace troupe
