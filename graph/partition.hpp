#pragma once
// Partitioning: a placed graph cut into one graph per device (TensorFlow's graph_partition.cc),
// each runnable by a worker that has nothing else. Every node keeps its name and attributes
// and requests its assigned device. Across devices:
//  - Data edges: a "_Send" on the producer's device and a "_Recv" on the consumer's, one pair
//    per tensor and destination device, in the producer's loop frame. The pair shares its
//    rendezvous key {send_device, recv_device, tensor_name} (attributes of both); each value
//    travels with its tag, which adds the step, frame and iteration.
//  - A constant (a Const without control inputs) is copied into every partition that reads it
//    instead of being sent.
//  - Control edges: the source's partition gets a dummy Const that waits for the source, sends
//    it, and the Recv becomes the control input of the destination ("^name" as tensor name).
//  - Loops whose nodes (those of nested loops and the loop's Exits included) lie on several
//    devices get, on each of those devices, a control loop of their own: Enter, Merge, Switch,
//    NextIteration and Exit copies driven by the loop's LoopCond (sent across like any value).
//    Every Recv inside such a loop waits for its device's control-loop Merge of the same tag
//    (the Recv of an Enter's value, which comes in iteration 0 only, for its Enter), so a
//    partition has entered a frame (and knows it in its own frame state) before any of its
//    nodes handle a value of it; the control loop's Exit leaves the frame with the loop's
//    other Exits on that device. The control loop of a nested loop enters from its enclosing
//    loop's control loop on the same device; an outermost one from a Const.
// A loop's back edge (NextIteration into Merge) must not cross devices (placement keeps them
// together); partition() fails if it does.
#include <memory>
#include <string>
#include <vector>

#include "graph/graph.hpp"

namespace troupe {

struct Partition {
  std::string device;  // full device name
  std::shared_ptr<Graph> graph;
};

struct Partitions {
  std::vector<Partition> parts;  // one per device that runs a node, in order of first node
  // Per node of the placed graph: its partition and its id there.
  struct Place {
    int part = -1;
    int node = -1;
  };
  std::vector<Place> of;
};

// Cuts `graph` by `device_of` (per node id, a full device name, as graph/placement.hpp gives).
Partitions partition(const Graph& graph, const std::vector<std::string>& device_of);
// The same, but a graph whose nodes all lie on one device becomes that device's partition
// itself (each node's requested device set to it), not a copy: `graph` is the partition's then.
Partitions partition(std::shared_ptr<Graph> graph, const std::vector<std::string>& device_of);
// A graph all of whose nodes lie on `device`, as that device's partition (the same as the above
// with every node on `device`).
Partitions whole_partition(std::shared_ptr<Graph> graph, const std::string& device);

// The rendezvous key of a _Send or _Recv: "send_device;recv_device;tensor_name". A Send and
// the Recv it feeds have the same key; the value's tag adds step, frame and iteration.
std::string rendezvous_key(const Node& send_or_recv);

}  // namespace troupe
