#pragma once
// The signature pipeline: one run signature (feeds, fetches, targets) of a graph pruned, placed
// and cut into partitions, the same way for a local session's executable and for a cluster's
// master, then divided into the shares of partitions the processes run:
//   prune      the subgraph the fetches and targets need, feeds as _Arg nodes, CSE'd
//              (graph/prune.hpp), checked for what no executor could run;
//   place      a device for every node among the devices given (graph/placement.hpp); over
//              several processes, every op on a variable goes where its VariableV2 asks to be;
//   partition  one graph per device, _Send/_Recv between them (graph/partition.hpp);
//   share      the partitions one process runs, and where the signature's feeds, fetches and
//              targets are among them: the PartitionSet an Executable is built from.
// It also says which task holds a variable (placement here, the Saver's question).
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/device_name.hpp"
#include "graph/partition.hpp"
#include "graph/placement.hpp"
#include "graph/prune.hpp"

namespace troupe {

// What one process runs of a signature: its partitions, and where the step's feeds, fetches and
// targets are among them (a local session's process runs every partition; a cluster member the
// ones on its task's devices).
struct PartitionSet {
  struct Signature {
    std::vector<std::pair<Endpoint, int>> fetches;  // (endpoint in the partition, fetch index)
    std::vector<int> targets;                       // nodes of the partition
  };
  struct Feed {
    int part;
    int node;  // the feed's _Arg node there
  };
  std::vector<Partition> parts;
  std::vector<Signature> signatures;     // per part
  std::vector<Feed> args;                // per feed of this process
  std::vector<std::string> fetch_names;  // per fetch of this process
  int num_targets = 0;
};

// A share of the partitions: its local fetch i is the signature's fetch fetch_index[i], its local
// feed i the signature's feed feed_index[i].
struct LocalSignature {
  PartitionSet set;
  std::vector<int> fetch_index;
  std::vector<int> feed_index;
};

// Where a signature's nodes may go.
struct SignaturePlacement {
  std::vector<std::string> devices;  // full names; an unconstrained node prefers the first
  std::string default_job = "localhost";  // what a request naming no job or task means
  int default_task = 0;
  bool single_process = true;  // every device is this process's (variables live in its shards)
  bool allow_soft_placement = true;
  std::optional<PlacementOptions::Policy> policy;  // unset: placement_policy_from_environment()
};
// This process's devices (the registry's), CPU:0 first.
SignaturePlacement local_placement();

struct PlacedSignature {
  Subgraph sub;
  Partitions cut;
  // The share of partitions `parts` (indices into cut.parts), in that order.
  LocalSignature share(const std::vector<int>& parts) const;
  // Every partition: what a local session's process runs.
  PartitionSet whole() const;
};
PlacedSignature place_signature(const Graph& graph, const std::vector<Endpoint>& feeds,
                                const std::vector<Endpoint>& fetches, const std::vector<int>& targets,
                                const SignaturePlacement& where);

// Whether `node` can run on a device of `type` ("CPU", "GPU"): placement's has_kernel. Ops the
// actors carry out themselves (Merge, the frame ops) run anywhere; variable and queue ops talk
// to actors from the host, on a CPU.
bool can_run_on(const Node& node, const std::string& type);

// The job and task holding a variable whose VariableV2 requests device `requested`: those it
// names, the defaults for what it leaves open (a job named alone means its task 0).
struct VariableHome {
  std::string job;
  int task = 0;
};
VariableHome variable_home(const DeviceSpec& requested, const std::string& default_job, int default_task);

}  // namespace troupe
