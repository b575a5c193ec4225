#pragma once
// The graph IR: nodes with data inputs (producer node, output port), control inputs, attributes,
// and a requested device. Nodes are only appended (ids are dense and stable, and a node's
// pointer stays valid), so Outputs and cached executables stay valid while the graph grows.
// A Graph is not thread-safe: build it from one thread, and do not extend it while a Session
// is preparing a run on it.
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "graph/attr.hpp"
#include "graph/op_def.hpp"

namespace troupe {

struct Endpoint {
  int node = -1;
  int port = 0;
  friend bool operator==(const Endpoint& a, const Endpoint& b) {
    return a.node == b.node && a.port == b.port;
  }
  friend bool operator<(const Endpoint& a, const Endpoint& b) {
    return a.node != b.node ? a.node < b.node : a.port < b.port;
  }
};

struct Node {
  int id = -1;
  std::string name;
  std::string op;
  const OpDef* op_def = nullptr;
  std::vector<Endpoint> inputs;
  std::vector<int> control_inputs;
  AttrMap attrs;
  std::string requested_device;
  std::vector<DType> output_types;
  std::vector<PartialShape> output_shapes;

  int num_outputs() const { return int(output_types.size()); }
  std::string describe() const { return op + " '" + name + "'"; }  // "MatMul 'dense/matmul'"
};

// What to add: inputs by endpoint of nodes already in the graph.
struct NodeSpec {
  std::string name;
  std::string op;
  std::vector<Endpoint> inputs;
  std::vector<int> control_inputs;
  AttrMap attrs;
  std::string requested_device;
};

struct Consumer {
  int node;
  int slot;  // input index of the consumer
};

class Graph {
 public:
  Graph() = default;
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Validates the op, the inputs and the name, runs the shape function, appends the node.
  // `like`: a node of another graph that this one copies (pruning, partitioning), whose inputs
  // here carry the same dtypes and shapes as there; its inferred outputs are taken instead of
  // running the op's shape function again.
  Node& add_node(NodeSpec spec, const Node* like = nullptr);

  // Room for `n` nodes in all, so that adding them moves nothing (a copy of a large graph).
  void reserve(int n);
  int size() const { return int(nodes_.size()); }
  const Node& node(int id) const { return *nodes_[id]; }
  Node& node(int id) { return *nodes_[id]; }
  const Node* find(const std::string& name) const;
  bool has_name(const std::string& name) const { return id_of(name) >= 0; }

  // For each node, each output port, who consumes it; and each node's control consumers.
  struct Edges {
    std::vector<std::vector<std::vector<Consumer>>> data;  // [node][port]
    std::vector<std::vector<int>> control;                 // [node]
  };
  Edges out_edges() const;
  // Node ids, producers before consumers, leaving out loops' back edges (a NextIteration's
  // output into its Merge). Throws if the graph has any other cycle.
  std::vector<int> topological_order() const;
  // Points data input `slot` of `node` at `from` and runs the op's shape function again (the
  // change is undone if it fails): how a while loop's Merge gets its NextIteration input,
  // which exists only after the loop body is built. Consumers keep the shapes inferred so far.
  void update_input(int node, int slot, Endpoint from);

 private:
  int id_of(std::string_view name) const;  // -1: no such node
  void index_name(int id);                 // makes nodes_[id]'s name found

  std::vector<std::unique_ptr<Node>> nodes_;
  // The nodes by name: open addressing (linear probing) over a power-of-two table at most half
  // full, each slot a node id + 1 (0: empty), the names compared in the nodes themselves. No
  // allocation per node: a std::unordered_map<std::string, int> would allocate a node and a
  // key for each, and pruning copies a large graph.
  std::vector<int32_t> name_slots_;
};

// Tensor names: "node:port", "node" (port 0); "^node" names a control input.
struct ParsedName {
  std::string node;
  int port = 0;
  bool control = false;
};
ParsedName parse_tensor_name(const std::string& name);
std::string tensor_name(const Node& node, int port);
// The attribute naming the while loop a node belongs to (set by ops::while_loop), and its
// value: the loop's frame name, "" outside any loop.
inline constexpr const char* kLoopFrameAttr = "_frame";
const std::string& loop_frame(const Node& node);
// The name a variable op's variable has (in its parameter shard, and for placement's colocation):
// attr "shared_name" where set and not empty, else the node's name.
const std::string& variable_name(const Node& node);
// A Const without control inputs: the same value in every step and frame. The executor hands
// it to its consumers once instead of sending it (except to a Merge or a frame op, which must
// see it arrive).
bool is_constant_value(const Node& node);
// Whether data input `slot` of `consumer` is a loop's back edge: an output of a NextIteration
// (into its Merge), or the LoopCond a loop invariant's constant Enter takes as input 1.
bool is_back_edge(const Graph& graph, const Node& consumer, int slot);

// Runs the op's shape function for `node` against the current graph (used by add_node and by
// GraphDef import).
void infer_shapes(const Graph& graph, Node& node);

}  // namespace troupe
