#include "graph/prune.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <unordered_map>

namespace troupe {
namespace {

// _Arg: the value of a feed, delivered by the executor at the start of a step.
TROUPE_REGISTER_OP(OpDef{
    .name = "_Arg",
    .num_inputs = 0,
    .stateful = true,
    .shape_fn = [](InferenceContext& c) {
      c.set_output(0, c.attr<DType>("dtype"), c.attr<PartialShape>("shape"));
    },
    .required_attrs = {"dtype", "shape", "index"}});

// Rebuilding a graph in topological order meets a loop's Merge before the NextIteration that
// feeds it. Such an input is pointed at the Merge's first input for the moment and closed by
// close() once every node exists.
class BackEdges {
 public:
  // The endpoint to build with for input `slot` of a node whose inputs map to `mapped`
  // (node -1: not built yet).
  Endpoint hold(std::vector<Endpoint>& mapped, int slot, Endpoint original) {
    if (mapped[slot].node >= 0) return mapped[slot];
    if (slot == 0 || mapped[0].node < 0)
      fail(ErrorCode::internal, "rebuilding the graph met an input built after its consumer that is not a loop's back edge");
    pending_.push_back({-1, slot, original});
    return mapped[0];
  }
  void built(int new_node) {
    for (auto it = pending_.rbegin(); it != pending_.rend() && it->node < 0; ++it) it->node = new_node;
  }
  template <class Map>
  void close(Graph& g, Map&& map) {
    for (auto& f : pending_) g.update_input(f.node, f.slot, map(f.original));
  }

 private:
  struct Fixup {
    int node;
    int slot;
    Endpoint original;
  };
  std::vector<Fixup> pending_;
};

}  // namespace

std::vector<bool> needed_nodes(const Graph& graph, const std::vector<Endpoint>& feeds,
                               const std::vector<Endpoint>& fetches,
                               const std::vector<int>& targets) {
  std::set<Endpoint> fed(feeds.begin(), feeds.end());
  std::vector<bool> needed(graph.size(), false);
  // Who first asked for each node, to explain an unfed placeholder.
  std::vector<std::string> asked_by(graph.size());
  std::vector<int> stack;
  auto need = [&](int id, const std::string& why) {
    if (!needed[id]) {
      needed[id] = true;
      asked_by[id] = why;
      stack.push_back(id);
    }
  };
  for (auto& f : fetches)
    if (!fed.count(f)) need(f.node, "fetch '" + tensor_name(graph.node(f.node), f.port) + "'");
  for (int t : targets) need(t, "target '" + graph.node(t).name + "'");
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    const Node& n = graph.node(id);
    if (n.op == "Placeholder")
      fail(ErrorCode::failed_precondition,
           "{} needs the value of placeholder '{}', which is not fed", asked_by[id], n.name);
    for (auto& in : n.inputs)
      if (!fed.count(in)) need(in.node, asked_by[id]);
    for (int c : n.control_inputs) need(c, asked_by[id]);
  }
  return needed;
}

Subgraph extract_subgraph(const Graph& graph, const std::vector<Endpoint>& feeds,
                          const std::vector<Endpoint>& fetches, const std::vector<int>& targets) {
  auto needed = needed_nodes(graph, feeds, fetches, targets);
  Subgraph out;
  out.graph = std::make_shared<Graph>();
  Graph& g = *out.graph;
  std::map<Endpoint, Endpoint> fed_to_arg;
  for (std::size_t i = 0; i < feeds.size(); ++i) {
    const Node& producer = graph.node(feeds[i].node);
    std::string name = "_arg/" + producer.name + "_" + std::to_string(feeds[i].port);
    auto [it, fresh] = fed_to_arg.emplace(feeds[i], Endpoint{});
    if (!fresh)
      fail(ErrorCode::invalid_argument, "tensor '{}' is fed twice",
           tensor_name(producer, feeds[i].port));
    Node& arg = g.add_node(NodeSpec{
        .name = name,
        .op = "_Arg",
        .attrs = {{"dtype", producer.output_types[feeds[i].port]},
                  {"shape", producer.output_shapes[feeds[i].port]},
                  {"index", int64_t(i)}},
        .requested_device = producer.requested_device});
    it->second = {arg.id, 0};
    out.args.push_back(arg.id);
  }
  std::vector<int> new_id(graph.size(), -1);
  BackEdges back_edges;
  for (int id : graph.topological_order()) {
    if (!needed[id]) continue;
    const Node& n = graph.node(id);
    NodeSpec spec{.name = n.name, .op = n.op, .attrs = n.attrs,
                  .requested_device = n.requested_device};
    auto map = [&](const Endpoint& in) {
      auto f = fed_to_arg.find(in);
      return f != fed_to_arg.end() ? f->second : Endpoint{new_id[in.node], in.port};
    };
    for (auto& in : n.inputs) spec.inputs.push_back(map(in));
    for (std::size_t i = 0; i < n.inputs.size(); ++i) spec.inputs[i] = back_edges.hold(spec.inputs, int(i), n.inputs[i]);
    for (int c : n.control_inputs) spec.control_inputs.push_back(new_id[c]);
    new_id[id] = g.add_node(std::move(spec)).id;
    back_edges.built(new_id[id]);
  }
  back_edges.close(g, [&](const Endpoint& in) {
    auto f = fed_to_arg.find(in);
    return f != fed_to_arg.end() ? f->second : Endpoint{new_id[in.node], in.port};
  });
  for (auto& f : fetches) {
    auto a = fed_to_arg.find(f);
    out.fetches.push_back(a != fed_to_arg.end() ? a->second : Endpoint{new_id[f.node], f.port});
  }
  for (int t : targets) out.targets.push_back(new_id[t]);
  return out;
}

Subgraph eliminate_common_subexpressions(const Subgraph& in) {
  const Graph& src = *in.graph;
  auto order = src.topological_order();
  std::vector<int> rep(src.size());
  for (int i = 0; i < src.size(); ++i) rep[i] = i;

  struct Key {
    const Node* node;
    std::vector<Endpoint> inputs;
    std::vector<int> controls;
  };
  auto hash_key = [&](const Key& k) {
    std::size_t h = std::hash<std::string>{}(k.node->op) ^ std::hash<std::string>{}(k.node->requested_device);
    for (auto& e : k.inputs) h = h * 31 + std::size_t(e.node) * 7 + std::size_t(e.port);
    for (int c : k.controls) h = h * 37 + std::size_t(c);
    for (auto& [name, value] : k.node->attrs) h = h * 41 + std::hash<std::string>{}(name) + attr_hash(value);
    return h;
  };
  auto same = [](const Key& a, const Key& b) {
    const Node &x = *a.node, &y = *b.node;
    if (x.op != y.op || x.requested_device != y.requested_device || a.inputs != b.inputs ||
        a.controls != b.controls || x.attrs.size() != y.attrs.size())
      return false;
    for (auto ia = x.attrs.begin(), ib = y.attrs.begin(); ia != x.attrs.end(); ++ia, ++ib)
      if (ia->first != ib->first || !attr_equal(ia->second, ib->second)) return false;
    return true;
  };
  std::unordered_multimap<std::size_t, Key> seen;
  for (int id : order) {
    const Node& n = src.node(id);
    if (n.op_def->stateful || n.op_def->variable_op) continue;
    Key key{&n, {}, {}};
    for (auto& e : n.inputs) key.inputs.push_back({rep[e.node], e.port});
    for (int c : n.control_inputs) key.controls.push_back(rep[c]);
    std::sort(key.controls.begin(), key.controls.end());
    key.controls.erase(std::unique(key.controls.begin(), key.controls.end()), key.controls.end());
    std::size_t h = hash_key(key);
    auto range = seen.equal_range(h);
    bool merged = false;
    for (auto it = range.first; it != range.second; ++it) {
      if (same(it->second, key)) {
        rep[id] = it->second.node->id;
        merged = true;
        break;
      }
    }
    if (!merged) seen.emplace(h, std::move(key));
  }

  Subgraph out;
  out.graph = std::make_shared<Graph>();
  std::vector<int> new_id(src.size(), -1);
  BackEdges back_edges;
  auto map = [&](const Endpoint& e) { return Endpoint{new_id[rep[e.node]], e.port}; };
  for (int id : order) {
    if (rep[id] != id) continue;
    const Node& n = src.node(id);
    NodeSpec spec{.name = n.name, .op = n.op, .attrs = n.attrs,
                  .requested_device = n.requested_device};
    for (auto& e : n.inputs) spec.inputs.push_back(map(e));
    for (std::size_t i = 0; i < n.inputs.size(); ++i) spec.inputs[i] = back_edges.hold(spec.inputs, int(i), n.inputs[i]);
    for (int c : n.control_inputs) spec.control_inputs.push_back(new_id[rep[c]]);
    new_id[id] = out.graph->add_node(std::move(spec)).id;
    back_edges.built(new_id[id]);
  }
  back_edges.close(*out.graph, map);
  for (auto& f : in.fetches) out.fetches.push_back({new_id[rep[f.node]], f.port});
  for (int t : in.targets) out.targets.push_back(new_id[rep[t]]);
  for (int a : in.args) out.args.push_back(new_id[a]);
  return out;
}

}  // namespace troupe
