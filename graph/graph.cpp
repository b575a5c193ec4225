#include "graph/graph.hpp"

#include <algorithm>
#include <cctype>

namespace troupe {

const Node* Graph::find(const std::string& name) const {
  const int id = id_of(name);
  return id < 0 ? nullptr : nodes_[id].get();
}

int Graph::id_of(std::string_view name) const {
  if (name_slots_.empty()) return -1;
  const std::size_t mask = name_slots_.size() - 1;
  for (std::size_t slot = std::hash<std::string_view>{}(name) & mask;; slot = (slot + 1) & mask) {
    const int32_t at = name_slots_[slot];
    if (at == 0) return -1;
    if (nodes_[at - 1]->name == name) return at - 1;
  }
}

namespace {
// Puts node `id`, named `name`, in the first empty slot of `slots` from its name's own.
void put_name(std::vector<int32_t>& slots, std::string_view name, int id) {
  const std::size_t mask = slots.size() - 1;
  std::size_t slot = std::hash<std::string_view>{}(name) & mask;
  while (slots[slot] != 0) slot = (slot + 1) & mask;
  slots[slot] = id + 1;
}
}  // namespace

void Graph::index_name(int id) {
  if (2 * (std::size_t(id) + 1) <= name_slots_.size()) return put_name(name_slots_, nodes_[id]->name, id);
  // At most half full: a table twice the size, every node (`id` among them) put in again.
  name_slots_.assign(std::max<std::size_t>(64, 2 * name_slots_.size()), 0);
  for (int i = 0; i < size(); ++i) put_name(name_slots_, nodes_[i]->name, i);
}

void infer_shapes(const Graph& graph, Node& node) {
  const OpDef& def = *node.op_def;
  InferenceContext c(node.name, node.op, node.attrs);
  for (auto& in : node.inputs) {
    const Node& p = graph.node(in.node);
    c.input_types.push_back(p.output_types[in.port]);
    c.input_shapes.push_back(p.output_shapes[in.port]);
    const Tensor* value = nullptr;
    if (p.op == "Const") value = &std::get<Tensor>(p.attrs.at("value"));
    c.input_values.push_back(value);
  }
  if (def.shape_fn) def.shape_fn(c);
  int expected = def.outputs_for(node.attrs);
  if (int(c.output_types.size()) != expected)
    fail(ErrorCode::internal, "{}: shape function gave {} outputs, the op has {}", node.describe(),
         c.output_types.size(), expected);
  node.output_types = std::move(c.output_types);
  node.output_shapes = std::move(c.output_shapes);
}

void Graph::reserve(int n) {
  nodes_.reserve(std::size_t(n));
  std::size_t slots = std::max<std::size_t>(64, name_slots_.size());
  while (slots < 2 * std::size_t(n)) slots *= 2;
  if (slots > name_slots_.size()) {
    name_slots_.assign(slots, 0);
    for (int id = 0; id < size(); ++id) put_name(name_slots_, nodes_[id]->name, id);
  }
}

Node& Graph::add_node(NodeSpec spec, const Node* like) {
  // A copy of a node (`like`, the same op) has its op's definition and attributes checked.
  const bool copy = like && like->op == spec.op;
  const OpDef& def = copy ? *like->op_def : OpRegistry::global().get(spec.op);
  if (spec.name.empty()) fail(ErrorCode::invalid_argument, "{} node needs a name", spec.op);
  if (def.num_inputs >= 0 && int(spec.inputs.size()) != def.num_inputs)
    fail(ErrorCode::invalid_argument, "{} '{}' takes {} inputs, got {}", spec.op, spec.name,
         def.num_inputs, spec.inputs.size());
  for (std::size_t i = 0; i < spec.inputs.size(); ++i) {
    auto in = spec.inputs[i];
    if (in.node < 0 || in.node >= size())
      fail(ErrorCode::invalid_argument, "{} '{}': input {} names no node of this graph", spec.op,
           spec.name, i);
    if (in.port < 0 || in.port >= nodes_[in.node]->num_outputs())
      fail(ErrorCode::invalid_argument, "{} '{}': input {} is output {} of {}, which has {} outputs",
           spec.op, spec.name, i, in.port, nodes_[in.node]->describe(),
           nodes_[in.node]->num_outputs());
  }
  for (int c : spec.control_inputs)
    if (c < 0 || c >= size())
      fail(ErrorCode::invalid_argument, "{} '{}': a control input names no node of this graph",
           spec.op, spec.name);
  if (!copy)
    for (auto& a : def.required_attrs)
      if (!spec.attrs.count(a))
        fail(ErrorCode::invalid_argument, "{} '{}' needs attribute '{}'", spec.op, spec.name, a);
  if (id_of(spec.name) >= 0) fail(ErrorCode::already_exists, "a node named '{}' is already in the graph", spec.name);

  auto node = std::make_unique<Node>();
  node->id = size();
  node->name = std::move(spec.name);
  node->op = std::move(spec.op);
  node->op_def = &def;
  node->inputs = std::move(spec.inputs);
  node->control_inputs = std::move(spec.control_inputs);
  std::sort(node->control_inputs.begin(), node->control_inputs.end());
  node->control_inputs.erase(std::unique(node->control_inputs.begin(), node->control_inputs.end()),
                             node->control_inputs.end());
  node->attrs = std::move(spec.attrs);
  node->requested_device = std::move(spec.requested_device);
  if (copy && like->inputs.size() == node->inputs.size()) {
    node->output_types = like->output_types;
    node->output_shapes = like->output_shapes;
  } else {
    infer_shapes(*this, *node);
  }
  nodes_.push_back(std::move(node));
  index_name(size() - 1);  // only now: a node whose shapes were refused is not in the graph
  return *nodes_.back();
}

Graph::Edges Graph::out_edges() const {
  Edges e;
  e.data.resize(nodes_.size());
  e.control.resize(nodes_.size());
  for (auto& n : nodes_) e.data[n->id].resize(n->num_outputs());
  for (auto& n : nodes_) {
    for (int i = 0; i < int(n->inputs.size()); ++i)
      e.data[n->inputs[i].node][n->inputs[i].port].push_back({n->id, i});
    for (int c : n->control_inputs) e.control[c].push_back(n->id);
  }
  return e;
}

const std::string& loop_frame(const Node& node) {
  static const std::string outside;
  auto it = node.attrs.find(kLoopFrameAttr);
  return it == node.attrs.end() ? outside : std::get<std::string>(it->second);
}

bool is_constant_value(const Node& node) { return node.op == "Const" && node.control_inputs.empty(); }

const std::string& variable_name(const Node& node) {
  auto it = node.attrs.find("shared_name");
  if (it == node.attrs.end()) return node.name;
  const auto* name = std::get_if<std::string>(&it->second);
  if (!name) fail(ErrorCode::invalid_argument, "{}: attr 'shared_name' is not a string", node.describe());
  return name->empty() ? node.name : *name;
}

bool is_back_edge(const Graph& graph, const Node& consumer, int slot) {
  if (graph.node(consumer.inputs[slot].node).op == "NextIteration") return true;
  // A loop invariant learns from its loop's LoopCond when the frame ends, and the condition
  // may itself read the invariant.
  if (consumer.op == "Enter" && slot == 1) {
    auto it = consumer.attrs.find("is_constant");
    return it != consumer.attrs.end() && std::get<bool>(it->second);
  }
  return false;
}

std::vector<int> Graph::topological_order() const {
  // Nodes are appended after their inputs, so id order is topological unless GraphDef import
  // built them otherwise or a loop was closed; compute it properly all the same. Loops' back
  // edges (is_back_edge) are left out, as TensorFlow does.
  const int n = int(nodes_.size());
  std::vector<int> pending(std::size_t(n), 0);
  std::vector<int> first(std::size_t(n) + 1, 0);  // the consumers of node i: edges[first[i], first[i+1])
  bool in_id_order = true;
  auto each_edge = [&](auto&& visit) {
    for (auto& node : nodes_) {
      for (int i = 0; i < int(node->inputs.size()); ++i)
        if (!is_back_edge(*this, *node, i)) visit(node->inputs[i].node, node->id);
      for (int c : node->control_inputs) visit(c, node->id);
    }
  };
  each_edge([&](int from, int to) {
    ++pending[to];
    ++first[from + 1];
    in_id_order = in_id_order && from < to;
  });
  std::vector<int> order(static_cast<std::size_t>(n));
  if (in_id_order) {  // the common case: the ids are an order already
    for (int id = 0; id < n; ++id) order[id] = id;
    return order;
  }
  for (int i = 0; i < n; ++i) first[i + 1] += first[i];
  std::vector<int> edges(static_cast<std::size_t>(first[n]));
  std::vector<int> fill(first.begin(), first.end() - 1);
  each_edge([&](int from, int to) { edges[fill[from]++] = to; });
  std::vector<int> ready;
  for (int id = 0; id < n; ++id)
    if (pending[id] == 0) ready.push_back(id);
  std::size_t placed = 0;
  while (!ready.empty()) {
    int id = ready.back();
    ready.pop_back();
    order[placed++] = id;
    for (int e = first[id]; e < first[id + 1]; ++e)
      if (--pending[edges[e]] == 0) ready.push_back(edges[e]);
  }
  if (placed != nodes_.size())
    fail(ErrorCode::invalid_argument, "graph has a cycle ({} of {} nodes ordered)", placed, nodes_.size());
  return order;
}

void Graph::update_input(int node, int slot, Endpoint from) {
  TROUPE_CHECK_ARG(node >= 0 && node < size() && from.node >= 0 && from.node < size(),
                   "update_input: no such node");
  Node& n = *nodes_[node];
  TROUPE_CHECK_ARG(slot >= 0 && slot < int(n.inputs.size()), "update_input: {} has no input {}", n.describe(), slot);
  TROUPE_CHECK_ARG(from.port >= 0 && from.port < nodes_[from.node]->num_outputs(), "update_input: {} has no output {}",
                   nodes_[from.node]->describe(), from.port);
  Endpoint before = n.inputs[slot];
  n.inputs[slot] = from;
  try {
    infer_shapes(*this, n);  // the op's checks, on the new input
  } catch (...) {
    n.inputs[slot] = before;
    infer_shapes(*this, n);
    throw;
  }
}

ParsedName parse_tensor_name(const std::string& name) {
  ParsedName p;
  std::string s = name;
  if (!s.empty() && s[0] == '^') {
    p.control = true;
    s = s.substr(1);
  }
  auto colon = s.rfind(':');
  if (colon != std::string::npos && colon + 1 < s.size() &&
      std::all_of(s.begin() + colon + 1, s.end(), ::isdigit)) {
    if (p.control) fail(ErrorCode::invalid_argument, "control input '{}' must not name a port", name);
    p.port = std::stoi(s.substr(colon + 1));
    s = s.substr(0, colon);
  }
  if (s.empty()) fail(ErrorCode::invalid_argument, "empty tensor name '{}'", name);
  p.node = s;
  return p;
}

std::string tensor_name(const Node& node, int port) { return node.name + ":" + std::to_string(port); }

}  // namespace troupe
