#include "graph/graph_def.hpp"

#include <fstream>
#include <iterator>
#include <unordered_map>

#include "core/wire/convert.hpp"
#include "core/wire/graph.capnp.h"

namespace troupe {
namespace {

using namespace wire_format;

template <class T, class List>
std::vector<T> to_vector(List list) {
  std::vector<T> out;
  out.reserve(list.size());
  for (auto x : list) out.push_back(x);
  return out;
}

void attr_to_wire(const AttrValue& value, wire::AttrValue::Builder out) {
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>) {
          out.setI(v);
        } else if constexpr (std::is_same_v<T, double>) {
          out.setF(v);
        } else if constexpr (std::is_same_v<T, bool>) {
          out.setB(v);
        } else if constexpr (std::is_same_v<T, std::string>) {
          out.setS(v);
        } else if constexpr (std::is_same_v<T, DType>) {
          out.setType(to_wire(v));
        } else if constexpr (std::is_same_v<T, PartialShape>) {
          auto s = out.initShape();
          s.setUnknownRank(!v.rank_known());
          if (v.rank_known()) {
            auto dims = s.initDims(v.rank());
            for (int i = 0; i < v.rank(); ++i) dims.set(i, v.dim(i));
          }
        } else if constexpr (std::is_same_v<T, Tensor>) {
          to_wire(v, out.initTensor());
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          auto l = out.initListI(v.size());
          for (std::size_t i = 0; i < v.size(); ++i) l.set(i, v[i]);
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          auto l = out.initListF(v.size());
          for (std::size_t i = 0; i < v.size(); ++i) l.set(i, v[i]);
        } else if constexpr (std::is_same_v<T, std::vector<std::string>>) {
          auto l = out.initListS(v.size());
          for (std::size_t i = 0; i < v.size(); ++i) l.set(i, v[i]);
        } else if constexpr (std::is_same_v<T, std::vector<DType>>) {
          auto l = out.initListType(v.size());
          for (std::size_t i = 0; i < v.size(); ++i) l.set(i, to_wire(v[i]));
        }
      },
      value);
}

AttrValue attr_from_wire(wire::AttrValue::Reader in, const std::string& where) {
  switch (in.which()) {
    case wire::AttrValue::I: return int64_t(in.getI());
    case wire::AttrValue::F: return in.getF();
    case wire::AttrValue::B: return in.getB();
    case wire::AttrValue::S: return std::string(in.getS().cStr());
    case wire::AttrValue::TYPE: return from_wire(in.getType());
    case wire::AttrValue::SHAPE: {
      auto s = in.getShape();
      if (s.getUnknownRank()) return PartialShape::unknown();
      return PartialShape::from_dims(to_vector<int64_t>(s.getDims()));
    }
    case wire::AttrValue::TENSOR: return from_wire(in.getTensor(), where);
    case wire::AttrValue::LIST_I: return to_vector<int64_t>(in.getListI());
    case wire::AttrValue::LIST_F: return to_vector<double>(in.getListF());
    case wire::AttrValue::LIST_S: {
      std::vector<std::string> v;
      for (auto s : in.getListS()) v.emplace_back(s.cStr());
      return v;
    }
    case wire::AttrValue::LIST_TYPE: {
      std::vector<DType> v;
      for (auto t : in.getListType()) v.push_back(from_wire(t));
      return v;
    }
  }
  fail(ErrorCode::data_loss, "{}: attribute of unknown kind", where);
}

std::shared_ptr<Graph> import_graph(wire::GraphDef::Reader def, const std::string& where) {
  if (def.getVersion() != kGraphVersion)
    fail(ErrorCode::data_loss, "{}: GraphDef version {} is not supported (this build reads {})",
         where, def.getVersion(), kGraphVersion);
  auto nodes = def.getNodes();
  std::unordered_map<std::string, unsigned> index;
  for (unsigned i = 0; i < nodes.size(); ++i)
    if (!index.emplace(nodes[i].getName().cStr(), i).second)
      fail(ErrorCode::data_loss, "{}: node '{}' appears twice", where, nodes[i].getName().cStr());

  // Add nodes after their inputs, whatever order the file lists them in. A loop's back edges
  // (is_back_edge: a NextIteration into its Merge, a LoopCond into a loop invariant's Enter)
  // are not followed; such an input points at the node's first input until every node exists.
  auto back_edge = [&](wire::NodeDef::Reader consumer, unsigned slot, const std::string& producer) {
    auto it = index.find(producer);
    if (it == index.end()) return false;
    if (std::string(nodes[it->second].getOp().cStr()) == "NextIteration") return true;
    if (std::string(consumer.getOp().cStr()) != "Enter" || slot != 1) return false;
    for (auto a : consumer.getAttrs())
      if (std::string(a.getName().cStr()) == "is_constant")
        return std::get<bool>(attr_from_wire(a.getValue(), where));
    return false;
  };
  struct Fixup {
    int node;
    int slot;
    std::string producer;
    int port;
  };
  std::vector<Fixup> fixups;
  auto graph = std::make_shared<Graph>();
  std::vector<int> state(nodes.size(), 0);  // 0 new, 1 in progress, 2 added
  std::unordered_map<std::string, int> ids;
  std::vector<std::pair<unsigned, unsigned>> stack;  // (node, next input to visit)
  for (unsigned root = 0; root < nodes.size(); ++root) {
    if (state[root]) continue;
    stack.push_back({root, 0});
    state[root] = 1;
    while (!stack.empty()) {
      auto& [n, next] = stack.back();
      auto node = nodes[n];
      auto inputs = node.getInputs();
      if (next < inputs.size()) {
        const unsigned slot = next;
        std::string input = inputs[next++].cStr();
        auto parsed = parse_tensor_name(input);
        if (!parsed.control && back_edge(node, slot, parsed.node)) continue;
        auto it = index.find(parsed.node);
        if (it == index.end())
          fail(ErrorCode::data_loss, "{}: node '{}' has input '{}', which names no node", where,
               node.getName().cStr(), input);
        if (state[it->second] == 1)
          fail(ErrorCode::data_loss, "{}: cycle through node '{}'", where, parsed.node);
        if (state[it->second] == 0) {
          state[it->second] = 1;
          stack.push_back({it->second, 0});
        }
        continue;
      }
      NodeSpec spec;
      spec.name = node.getName().cStr();
      spec.op = node.getOp().cStr();
      spec.requested_device = node.getDevice().cStr();
      std::vector<std::pair<int, ParsedName>> deferred;  // back edges to close later
      for (auto in : inputs) {
        auto parsed = parse_tensor_name(in.cStr());
        auto known = ids.find(parsed.node);
        if (known == ids.end()) {  // a back edge whose producer comes later
          if (parsed.control || spec.inputs.empty())
            fail(ErrorCode::data_loss, "{}: node '{}' needs '{}' before it exists", where, spec.name, parsed.node);
          deferred.push_back({int(spec.inputs.size()), parsed});
          spec.inputs.push_back(spec.inputs.front());
          continue;
        }
        if (parsed.control)
          spec.control_inputs.push_back(known->second);
        else
          spec.inputs.push_back({known->second, parsed.port});
      }
      for (auto a : node.getAttrs())
        spec.attrs.emplace(a.getName().cStr(),
                           attr_from_wire(a.getValue(), where + ", node '" + spec.name + "'"));
      if (!OpRegistry::global().find(spec.op))
        fail(ErrorCode::data_loss, "{}: node '{}' has op '{}', which this build does not know",
             where, spec.name, spec.op);
      try {
        std::string name = spec.name;
        int id = graph->add_node(std::move(spec)).id;
        ids[name] = id;
        for (auto& [slot, parsed] : deferred) fixups.push_back({id, slot, parsed.node, parsed.port});
      } catch (const Error& e) {
        throw Error(e.code(), where + ": " + e.what());
      }
      state[n] = 2;
      stack.pop_back();
    }
  }
  for (auto& f : fixups) {
    try {
      graph->update_input(f.node, f.slot, {ids.at(f.producer), f.port});
    } catch (const Error& e) {
      throw Error(ErrorCode::data_loss, where + ": " + e.what());
    }
  }
  return graph;
}

}  // namespace

std::vector<unsigned char> graph_to_bytes(const Graph& graph) {
  capnp::MallocMessageBuilder message;
  auto def = message.initRoot<wire::GraphDef>();
  def.setVersion(kGraphVersion);
  auto nodes = def.initNodes(graph.size());
  for (int i = 0; i < graph.size(); ++i) {
    const Node& n = graph.node(i);
    auto out = nodes[i];
    out.setName(n.name);
    out.setOp(n.op);
    out.setDevice(n.requested_device);
    auto inputs = out.initInputs(n.inputs.size() + n.control_inputs.size());
    unsigned k = 0;
    for (auto& in : n.inputs) inputs.set(k++, tensor_name(graph.node(in.node), in.port));
    for (int c : n.control_inputs) inputs.set(k++, "^" + graph.node(c).name);
    auto attrs = out.initAttrs(n.attrs.size());
    k = 0;
    for (auto& [name, value] : n.attrs) {
      attrs[k].setName(name);
      attr_to_wire(value, attrs[k].initValue());
      ++k;
    }
  }
  return message_to_bytes(message);
}

std::shared_ptr<Graph> graph_from_bytes(const unsigned char* data, std::size_t size,
                                        const std::string& where) {
  return read_message<wire::GraphDef>(data, size, where, "GraphDef",
                                      [&](wire::GraphDef::Reader r) { return import_graph(r, where); });
}

void write_graph_file(const Graph& graph, const std::string& path) {
  auto bytes = graph_to_bytes(graph);
  std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) fail(ErrorCode::unavailable, "cannot open '{}' for writing", tmp);
    out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
    if (!out.flush()) fail(ErrorCode::unavailable, "cannot write '{}'", tmp);
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0)
    fail(ErrorCode::unavailable, "cannot rename '{}' to '{}'", tmp, path);
}

std::shared_ptr<Graph> read_graph_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::not_found, "cannot open GraphDef file '{}'", path);
  std::vector<unsigned char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  return graph_from_bytes(bytes.data(), bytes.size(), "GraphDef file '" + path + "'");
}

}  // namespace troupe
