#include "graph/prune.hpp"

#include <algorithm>
#include <map>
#include <set>

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
  // Who first asked for each node (a fetch or target, by index), to explain an unfed placeholder.
  std::vector<int> asked_by(graph.size(), -1);
  auto asker = [&](int i) {
    return i < int(fetches.size()) ? "fetch '" + tensor_name(graph.node(fetches[i].node), fetches[i].port) + "'"
                                   : "target '" + graph.node(targets[i - fetches.size()]).name + "'";
  };
  std::vector<int> stack;
  auto need = [&](int id, int why) {
    if (!needed[id]) {
      needed[id] = true;
      asked_by[id] = why;
      stack.push_back(id);
    }
  };
  for (std::size_t i = 0; i < fetches.size(); ++i)
    if (!fed.count(fetches[i])) need(fetches[i].node, int(i));
  for (std::size_t i = 0; i < targets.size(); ++i) need(targets[i], int(fetches.size() + i));
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    const Node& n = graph.node(id);
    if (n.op == "Placeholder")
      fail(ErrorCode::failed_precondition,
           "{} needs the value of placeholder '{}', which is not fed", asker(asked_by[id]), n.name);
    for (auto& in : n.inputs)
      if (fed.empty() || !fed.count(in)) need(in.node, asked_by[id]);
    for (int c : n.control_inputs) need(c, asked_by[id]);
  }
  return needed;
}

namespace {

std::vector<int> id_order(const Graph& g) {
  std::vector<int> order(std::size_t(g.size()));
  for (int i = 0; i < g.size(); ++i) order[std::size_t(i)] = i;
  return order;
}

// The _Arg node of each feed, added to `g` first; refuses a tensor fed twice.
std::map<Endpoint, Endpoint> add_args(const Graph& graph, const std::vector<Endpoint>& feeds, Graph& g,
                                      std::vector<int>& args) {
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
    args.push_back(arg.id);
  }
  return fed_to_arg;
}

// Common subexpressions among the nodes of `g` that `include` says (all when null), visited in
// `order` (a topological one; of nodes that compute the same thing the first visited stands for
// the others): per node, the node that stands for it (itself unless merged). `input_key(e, rep)`
// is what input `e` counts as when comparing nodes (its producer's representative, or a stand-in
// for a fed tensor).
template <class InputKey>
std::vector<int> representatives(const Graph& g, const std::vector<int>& order, const std::vector<bool>* include,
                                 InputKey&& input_key) {
  std::vector<int> rep(std::size_t(g.size()));
  for (int i = 0; i < g.size(); ++i) rep[std::size_t(i)] = i;
  // A node's key: the node (op, device, attributes) and its inputs and sorted control inputs as
  // counted, the latter two kept in `inputs` and `controls` from the given offsets.
  struct Key {
    const Node* node;
    uint32_t inputs, num_inputs, controls, num_controls;
  };
  std::vector<Endpoint> inputs;
  std::vector<int> controls;
  inputs.reserve(order.size() * 2);
  auto hash_key = [&](const Key& k) {
    std::size_t h = std::hash<std::string>{}(k.node->op) ^ std::hash<std::string>{}(k.node->requested_device);
    for (uint32_t i = 0; i < k.num_inputs; ++i)
      h = h * 31 + std::size_t(inputs[k.inputs + i].node) * 7 + std::size_t(inputs[k.inputs + i].port);
    for (uint32_t i = 0; i < k.num_controls; ++i) h = h * 37 + std::size_t(controls[k.controls + i]);
    for (auto& [name, value] : k.node->attrs) h = h * 41 + std::hash<std::string>{}(name) + attr_hash(value);
    return h;
  };
  auto same = [&](const Key& a, const Key& b) {
    const Node &x = *a.node, &y = *b.node;
    if (x.op != y.op || x.requested_device != y.requested_device || a.num_inputs != b.num_inputs ||
        a.num_controls != b.num_controls || x.attrs.size() != y.attrs.size() ||
        !std::equal(inputs.begin() + a.inputs, inputs.begin() + a.inputs + a.num_inputs, inputs.begin() + b.inputs) ||
        !std::equal(controls.begin() + a.controls, controls.begin() + a.controls + a.num_controls,
                    controls.begin() + b.controls))
      return false;
    for (auto ia = x.attrs.begin(), ib = y.attrs.begin(); ia != x.attrs.end(); ++ia, ++ib)
      if (ia->first != ib->first || !attr_equal(ia->second, ib->second)) return false;
    return true;
  };
  // The nodes kept as representatives so far, by key hash: open addressing (linear probing) over
  // a power-of-two table at most half full, entries indices into `kept` plus one (0: empty).
  std::vector<std::pair<std::size_t, Key>> kept;  // (hash, key)
  kept.reserve(order.size());
  std::size_t slots = 16;
  while (slots < 2 * order.size()) slots *= 2;
  std::vector<uint32_t> table(slots, 0);
  for (int id : order) {
    if (include && !(*include)[std::size_t(id)]) continue;
    const Node& n = g.node(id);
    if (n.op_def->stateful || n.op_def->variable_op) continue;
    Key key{&n, uint32_t(inputs.size()), uint32_t(n.inputs.size()), uint32_t(controls.size()), 0};
    for (auto& e : n.inputs) inputs.push_back(input_key(e, rep));
    for (int c : n.control_inputs) controls.push_back(rep[std::size_t(c)]);
    std::sort(controls.begin() + key.controls, controls.end());
    controls.erase(std::unique(controls.begin() + key.controls, controls.end()), controls.end());
    key.num_controls = uint32_t(controls.size()) - key.controls;
    const std::size_t h = hash_key(key);
    std::size_t slot = h & (slots - 1);
    bool merged = false;
    for (; table[slot] != 0; slot = (slot + 1) & (slots - 1)) {
      const auto& [other_hash, other] = kept[table[slot] - 1];
      if (other_hash == h && same(other, key)) {
        rep[std::size_t(id)] = other.node->id;
        merged = true;
        break;
      }
    }
    if (merged) {  // its key is not kept
      inputs.resize(key.inputs);
      controls.resize(key.controls);
    } else {
      kept.push_back({h, key});
      table[slot] = uint32_t(kept.size());
    }
  }
  return rep;
}

// Copies into `g` the nodes of `src` in `order` (a topological one) that `keep` says, each input and control input
// through `map` (an Endpoint of `src` -> one of `g`); `new_id` gets each copy's id. Inputs
// built later than their consumer (a loop's back edges, the control inputs while_loop adds to
// nodes it made earlier) are closed at the end.
template <class Keep, class Map>
void copy_nodes(const Graph& src, const std::vector<int>& order, Keep&& keep, Map&& map, Graph& g,
                std::vector<int>& new_id) {
  BackEdges back_edges;
  std::vector<std::pair<int, int>> later_controls;  // (copy, control input of src): added to a node after it was built
  g.reserve(g.size() + int(std::count_if(order.begin(), order.end(), keep)));
  for (int id : order) {
    if (!keep(id)) continue;
    const Node& n = src.node(id);
    NodeSpec spec{.name = n.name, .op = n.op, .attrs = n.attrs, .requested_device = n.requested_device};
    spec.inputs.reserve(n.inputs.size());
    for (auto& in : n.inputs) spec.inputs.push_back(map(in));
    for (std::size_t i = 0; i < n.inputs.size(); ++i) spec.inputs[i] = back_edges.hold(spec.inputs, int(i), n.inputs[i]);
    std::vector<int> later;
    for (int c : n.control_inputs) {
      const int mapped = map(Endpoint{c, -1}).node;
      if (mapped >= 0) spec.control_inputs.push_back(mapped);
      else later.push_back(c);
    }
    new_id[std::size_t(id)] = g.add_node(std::move(spec), &n).id;
    back_edges.built(new_id[std::size_t(id)]);
    for (int c : later) later_controls.push_back({new_id[std::size_t(id)], c});
  }
  back_edges.close(g, map);
  for (auto [copy, c] : later_controls) {
    auto& controls = g.node(copy).control_inputs;
    const int mapped = map(Endpoint{c, -1}).node;
    if (mapped < 0) fail(ErrorCode::internal, "rebuilding the graph: {} has a control input from a node not copied",
                         g.node(copy).describe());
    if (std::find(controls.begin(), controls.end(), mapped) == controls.end()) {
      controls.push_back(mapped);
      std::sort(controls.begin(), controls.end());
    }
  }
}

}  // namespace

Subgraph extract_subgraph(const Graph& graph, const std::vector<Endpoint>& feeds,
                          const std::vector<Endpoint>& fetches, const std::vector<int>& targets) {
  auto needed = needed_nodes(graph, feeds, fetches, targets);
  Subgraph out;
  out.graph = std::make_shared<Graph>();
  const auto fed_to_arg = add_args(graph, feeds, *out.graph, out.args);
  std::vector<int> new_id(std::size_t(graph.size()), -1);
  auto map = [&](const Endpoint& in) {
    auto f = fed_to_arg.find(in);
    return f != fed_to_arg.end() ? f->second : Endpoint{new_id[std::size_t(in.node)], in.port};
  };
  copy_nodes(graph, graph.topological_order(), [&](int id) { return bool(needed[std::size_t(id)]); }, map, *out.graph,
             new_id);
  for (auto& f : fetches) out.fetches.push_back(map(f));
  for (int t : targets) out.targets.push_back(new_id[std::size_t(t)]);
  return out;
}

Subgraph eliminate_common_subexpressions(const Subgraph& in) {
  const Graph& src = *in.graph;
  const auto order = src.topological_order();
  // Merged in id order: extract_subgraph built `src` in its graph's topological order, so this
  // visits the nodes as prune_and_merge does and keeps the same ones.
  const auto rep = representatives(src, id_order(src), nullptr, [](const Endpoint& e, const std::vector<int>& r) {
    return Endpoint{r[std::size_t(e.node)], e.port};
  });
  Subgraph out;
  out.graph = std::make_shared<Graph>();
  std::vector<int> new_id(std::size_t(src.size()), -1);
  auto map = [&](const Endpoint& e) { return Endpoint{new_id[std::size_t(rep[std::size_t(e.node)])], e.port}; };
  copy_nodes(src, order, [&](int id) { return rep[std::size_t(id)] == id; }, map, *out.graph, new_id);
  for (auto& f : in.fetches) out.fetches.push_back(map(f));
  for (int t : in.targets) out.targets.push_back(new_id[std::size_t(rep[std::size_t(t)])]);
  for (int a : in.args) out.args.push_back(new_id[std::size_t(a)]);
  return out;
}

Subgraph prune_and_merge(const Graph& graph, const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                         const std::vector<int>& targets) {
  auto needed = needed_nodes(graph, feeds, fetches, targets);
  Subgraph out;
  out.graph = std::make_shared<Graph>();
  const auto fed_to_arg = add_args(graph, feeds, *out.graph, out.args);
  const auto order = graph.topological_order();
  // A fed tensor counts as its feed (node -1 - its _Arg's id), so readers of one feed merge.
  const auto rep = representatives(graph, order, &needed, [&](const Endpoint& e, const std::vector<int>& r) {
    auto f = fed_to_arg.find(e);
    return f != fed_to_arg.end() ? Endpoint{-1 - f->second.node, 0} : Endpoint{r[std::size_t(e.node)], e.port};
  });
  std::vector<int> new_id(std::size_t(graph.size()), -1);
  auto map = [&](const Endpoint& in) {
    if (in.port >= 0) {
      auto f = fed_to_arg.find(in);
      if (f != fed_to_arg.end()) return f->second;
    }
    return Endpoint{new_id[std::size_t(rep[std::size_t(in.node)])], in.port};
  };
  copy_nodes(graph, order, [&](int id) { return needed[std::size_t(id)] && rep[std::size_t(id)] == id; }, map,
             *out.graph, new_id);
  for (auto& f : fetches) out.fetches.push_back(map(f));
  for (int t : targets) out.targets.push_back(new_id[std::size_t(rep[std::size_t(t)])]);
  return out;
}

}  // namespace troupe
