#pragma once
// Placement: which device runs each node of a graph (TensorFlow's placer.cc). Works on the
// graph alone, so the master of a cluster can place a graph on devices of other processes.
//
// The rules, in the order they apply:
//  1. Requests: a node's requested device (set by Scope::with_device) is a full or partial
//     device spec ("/job:ps/task:1/device:CPU:0", "/job:worker", "/device:GPU:0", ""). A
//     request naming neither job nor task means the default job and task; one naming a job
//     but no task, any task of that job. A request that is no device spec fails, naming the node.
//  2. Colocation groups: nodes that must share a device form one group, and the group's
//     request is the merge of its members' requests. Groups come from
//       - the "_class" attribute, a list of "loc:@<node name>" (Scope::colocate_with); a name
//         not in the graph (pruned away) is ignored, as are entries of another form;
//       - variable ops: every op reading or updating a variable goes where the variable's
//         VariableV2 node goes (same variable name, attr "shared_name" or else the node name);
//       - a loop gradient's stack: the StackPush and StackPop of one "stack_name";
//       - a loop's NextIteration goes with the Merge it feeds (its request yields to the
//         Merge's: the back edge stays on one device).
//     Two requests that disagree (different job, task, type or index) fail with
//     invalid_argument naming both nodes, both requested devices and why they are colocated.
//  3. Candidates: the devices matching the group's request on which every member has a kernel
//     (`has_kernel`). None (no such device, or none with a kernel): with soft placement the
//     group goes to the CPU devices of the requested job and task (TensorFlow's
//     allow_soft_placement), so "/device:GPU:0" runs on a CPU where there is no GPU or no GPU
//     kernel for the op (today, every op), told on standard error once per op type. Still
//     none: if no device matches the request, an error naming the node, the request and the
//     devices there are; else one naming the node, the device and the op without a kernel.
//  4. Choice: a group with one candidate (a request naming one device) goes there. Otherwise,
//     in topological order (a group when its first member comes up), the candidate that
//     costs least: the bytes its members' inputs from already placed producers would cross
//     from other devices (shape-known inputs count their size, others 4096 bytes), then a
//     candidate of the default job, task and device type, then candidate order. A graph
//     without requests so stays on the default device, and unconstrained nodes follow their
//     inputs. Policy::alternate (tests; TROUPE_PLACEMENT=alternate) instead hands each group
//     with several candidates the next candidate in turn (one counter across groups), to
//     spread a graph over devices node by node.
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
  // Unset: every op has a kernel on every device.
  std::function<bool(const Node& node, const std::string& type)> has_kernel;
  bool allow_soft_placement = true;
  // A process of its own (a local Session): the job and task a request names are taken as the
  // default job and task (and colocated nodes asking for different ones do not conflict), so a
  // graph written for a cluster ("/job:ps/task:0") runs in one process unchanged.
  bool single_process = false;
  enum class Policy { cost, alternate };
  Policy policy = Policy::cost;
};

// The device of every node of `graph` (indexed by node id), by full name. Throws
// invalid_argument as described above.
std::vector<std::string> place(const Graph& graph, const PlacementOptions& options);
// The same as indices into options.devices (no device name per node: a large graph's set-up
// pays for each).
std::vector<int> place_indices(const Graph& graph, const PlacementOptions& options);

// The policy named by TROUPE_PLACEMENT ("cost" or unset, "alternate"); throws invalid_argument
// for any other value.
PlacementOptions::Policy placement_policy_from_environment();

}  // namespace troupe
