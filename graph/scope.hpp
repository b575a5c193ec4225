#pragma once
// The C++ graph builder. A Scope knows the graph, a name prefix ("layer1/"), a device to
// request, and control dependencies to add; op builder functions (ops/*.hpp) take a Scope and
// Outputs and return Outputs. Scopes are cheap values; those derived from one root share the
// graph and the table of names used, so names stay unique.
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "graph/graph.hpp"

namespace troupe {

class Output {
 public:
  Output() = default;
  Output(Node* node, int port = 0) : node_(node), port_(port) {}
  Node* node() const { return node_; }
  int port() const { return port_; }
  Endpoint endpoint() const { return {node_->id, port_}; }
  std::string name() const { return tensor_name(*node_, port_); }
  DType dtype() const { return node_->output_types[port_]; }
  const PartialShape& shape() const { return node_->output_shapes[port_]; }
  explicit operator bool() const { return node_ != nullptr; }

 private:
  Node* node_ = nullptr;
  int port_ = 0;
};

// A device function (TensorFlow's tf.device(function)): given a node about to be added (its name,
// op and attributes, and in requested_device what the scope asks for), the device it requests.
using DeviceFunction = std::function<std::string(const NodeSpec& node)>;

class Scope {
 public:
  static Scope root();  // a new, empty graph
  explicit Scope(std::shared_ptr<Graph> graph);

  Graph& graph() const { return *state_->graph; }
  const std::shared_ptr<Graph>& graph_ptr() const { return state_->graph; }

  Scope sub(const std::string& name) const;  // names below "<prefix>name/", made unique
  Scope with_op_name(const std::string& name) const;  // the next op is named exactly so
  Scope with_device(const std::string& device) const;
  Scope with_control_dependencies(const std::vector<Output>& deps) const;
  Scope with_control_dependencies(const std::vector<Node*>& deps) const;
  // Ops built under the scope must share a device with `node` (TensorFlow's tf.colocate_with):
  // they get "_class" = {"loc:@<node name>"}, added to any earlier colocations of the scope,
  // and graph/placement.hpp puts them where `node` goes. The scope's requested device is
  // cleared, so that they follow `node` rather than conflict with it; with_device on the
  // returned scope requests one again.
  Scope colocate_with(const Node& node) const;
  Scope colocate_with(Output output) const { return colocate_with(*output.node()); }
  // Float32 values the ops built under the scope produce cross processes as float16 (lossy:
  // relative error at most 2^-11; TensorFlow whitepaper §5.5): the "_float16_transfer" attribute.
  // Only edges between processes of a cluster are affected; SessionOptions::float16_transfer
  // does the same for the whole graph.
  Scope with_float16_transfer(bool on = true) const;
  // Every node built under the scope (but one colocated with another node, which goes where that
  // node goes) requests the device `fn` gives it, after the scope's own device is applied.
  // ops/state/replica_device_setter.hpp makes one that spreads variables over ps tasks.
  Scope with_device_function(DeviceFunction fn) const;

  const std::string& prefix() const { return prefix_; }
  const std::string& device() const { return device_; }

  // Adds a node of `op` under this scope. `name_hint` defaults to the op's name.
  Node& add(const std::string& op, const std::vector<Output>& inputs, AttrMap attrs = {},
            const std::string& name_hint = "") const;
  // A name not yet used in the graph: "<prefix>base", then "<prefix>base_1", ...
  std::string unique_name(const std::string& base) const;

 private:
  struct State {
    std::shared_ptr<Graph> graph;
    std::unordered_set<std::string> used;
    std::unordered_map<std::string, int> next_suffix;
  };
  std::shared_ptr<State> state_;
  std::string prefix_;
  std::string op_name_;
  std::string device_;
  std::vector<int> control_deps_;
  std::vector<std::string> colocation_;  // "loc:@<node name>"
  bool float16_transfer_ = false;
  DeviceFunction device_function_;
};

}  // namespace troupe
