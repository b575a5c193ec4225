#include "graph/partition.hpp"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include <fmt/format.h>

namespace troupe {
namespace {

// The loops of a graph: per frame name its parent frame, LoopCond, parallel_iterations, the
// control inputs of its Exits (the iteration gate, where a gradient needs one), and the
// devices its nodes lie on.
struct Loop {
  std::string parent;
  int loop_cond = -1;
  int64_t parallel_iterations = 1;
  std::vector<int> exit_controls;
  std::set<std::string> devices;
};

// The frame a node works in for the partition's frame state: its own, except an Exit's, which
// leaves the frame its value comes from.
const std::string& frame_of_work(const Graph& g, const Node& n) {
  return n.op == "Exit" ? loop_frame(g.node(n.inputs[0].node)) : loop_frame(n);
}

std::map<std::string, Loop> find_loops(const Graph& g, const std::vector<std::string>& device_of) {
  std::map<std::string, Loop> loops;
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (n.op == "Enter") {
      Loop& l = loops[get_attr<std::string>(n.attrs, "frame_name", n.name)];
      l.parent = loop_frame(g.node(n.inputs[0].node));
      l.parallel_iterations = get_attr_or<int64_t>(n.attrs, "parallel_iterations", 1);
    } else if (n.op == "LoopCond") {
      loops[loop_frame(n)].loop_cond = id;
    } else if (n.op == "Exit") {
      auto& gate = loops[frame_of_work(g, n)].exit_controls;
      for (int c : n.control_inputs)
        if (std::find(gate.begin(), gate.end(), c) == gate.end()) gate.push_back(c);
    }
  }
  for (int id = 0; id < g.size(); ++id) {
    // A node lies in its frame and in every frame around it.
    for (std::string f = frame_of_work(g, g.node(id)); !f.empty();) {
      auto it = loops.find(f);
      if (it == loops.end())
        fail(ErrorCode::internal, "{} is in while loop '{}', which has no Enter in the graph", g.node(id).describe(), f);
      it->second.devices.insert(device_of[id]);
      f = it->second.parent;
    }
  }
  return loops;
}

// "/job:ps/task:1/device:CPU:0" -> "ps1_CPU0", for the names of the nodes partition() adds.
std::string short_device(const std::string& device) {
  std::string out;
  for (const char* part : {"/job:", "/task:", "/device:"}) {
    auto at = device.find(part);
    if (at == std::string::npos) continue;
    auto begin = at + std::char_traits<char>::length(part);
    auto end = device.find('/', begin);
    std::string v = device.substr(begin, end == std::string::npos ? std::string::npos : end - begin);
    std::erase(v, ':');
    out += (out.empty() || std::string(part) == "/task:" ? "" : "_") + v;
  }
  return out.empty() ? device : out;
}

class Partitioner {
 public:
  Partitioner(const Graph& g, const std::vector<std::string>& device_of)
      : g_(g), device_of_(device_of), loops_(find_loops(g, device_of)) {
    result_.of.resize(std::size_t(g.size()));
  }

  Partitions run() {
    const std::vector<int> order = g_.topological_order();
    for (int id : order) part_of(device_of_[id]);  // partitions in order of first node
    start_control_loops();
    std::vector<std::pair<int, int>> back_edges;  // (node, slot) closed once every node exists
    for (int id : order) build(id, back_edges);
    for (auto [id, slot] : back_edges) {
      const Node& n = g_.node(id);
      auto [part, local] = result_.of[id];
      Endpoint from = n.inputs[std::size_t(slot)];
      graph(part).update_input(local, slot, {result_.of[from.node].node, from.port});
    }
    finish_control_loops();
    for (auto& s : sends_) add_send(s);
    return std::move(result_);
  }

 private:
  struct ControlLoop {
    int enter = -1, merge = -1, exit = -1;
  };
  struct PendingSend {  // a _Send added once every node exists
    std::string from_device, to_device;
    Endpoint value;  // in the placed graph; control: the dummy's source, port -1
    std::string tensor;
    std::string frame;
  };

  Graph& graph(int part) { return *result_.parts[std::size_t(part)].graph; }

  int part_of(const std::string& device) {
    auto [it, fresh] = part_index_.try_emplace(device, int(result_.parts.size()));
    if (fresh) result_.parts.push_back({device, std::make_shared<Graph>()});
    return it->second;
  }

  // A name for a node partition() adds: used neither in `g` nor by a node of the placed graph
  // (which may still be added to `g`).
  std::string fresh_name(Graph& g, const std::string& base) {
    std::string name = base;
    for (int k = 1; g.has_name(name) || g_.has_name(name); ++k) name = base + "_" + std::to_string(k);
    return name;
  }

  static AttrMap in_frame(const std::string& frame, AttrMap attrs = {}) {
    if (!frame.empty()) attrs[kLoopFrameAttr] = frame;
    return attrs;
  }

  // Enter and Merge of every control loop, outer loops first; Switch, NextIteration and Exit
  // come once the LoopConds exist (finish_control_loops).
  void start_control_loops() {
    std::vector<std::string> order;  // parents before children
    std::set<std::string> done;
    std::function<void(const std::string&)> visit = [&](const std::string& f) {
      if (f.empty() || done.count(f)) return;
      visit(loops_.at(f).parent);
      done.insert(f);
      order.push_back(f);
    };
    for (auto& [frame, loop] : loops_) visit(frame);
    for (const std::string& frame : order) {
      const Loop& loop = loops_.at(frame);
      if (loop.devices.size() < 2) continue;
      if (loop.loop_cond < 0)
        fail(ErrorCode::internal, "while loop '{}' spans {} devices but has no LoopCond in the graph", frame,
             loop.devices.size());
      for (const std::string& device : loop.devices) {
        int part = part_of(device);
        Graph& g = graph(part);
        Endpoint start;
        if (loop.parent.empty()) {
          start = {g.add_node(NodeSpec{.name = fresh_name(g, frame + "/_control_loop/start"),
                                       .op = "Const",
                                       .attrs = {{"value", Tensor::scalar<int32_t>(0)}},
                                       .requested_device = device})
                       .id,
                   0};
        } else {
          start = {control_loops_.at({loop.parent, device}).merge, 0};
        }
        ControlLoop cl;
        cl.enter = g.add_node(NodeSpec{.name = fresh_name(g, frame + "/_control_loop/enter"),
                                       .op = "Enter",
                                       .inputs = {start},
                                       .attrs = in_frame(frame, {{"frame_name", frame},
                                                                 {"is_constant", false},
                                                                 {"parallel_iterations", loop.parallel_iterations}}),
                                       .requested_device = device})
                       .id;
        cl.merge = g.add_node(NodeSpec{.name = fresh_name(g, frame + "/_control_loop/merge"),
                                       .op = "Merge",
                                       .inputs = {{cl.enter, 0}, {cl.enter, 0}},
                                       .attrs = in_frame(frame),
                                       .requested_device = device})
                       .id;
        control_loops_[{frame, device}] = cl;
      }
    }
  }

  // Switch, NextIteration and Exit of every control loop, inner loops first: a control loop's
  // Exit waits, in every iteration, for what on its device still needs the frame state after
  // the loop's condition has turned false (see done_in_iteration).
  void finish_control_loops() {
    std::vector<std::pair<std::string, std::string>> order;
    for (auto& [key, cl] : control_loops_) order.push_back(key);
    auto depth = [&](std::string f) {
      int d = 0;
      for (; !f.empty(); f = loops_.at(f).parent) ++d;
      return d;
    };
    std::stable_sort(order.begin(), order.end(), [&](auto& a, auto& b) { return depth(a.first) > depth(b.first); });
    for (const auto& key : order) {
      const auto& [frame, device] = key;
      ControlLoop& cl = control_loops_.at(key);
      const Loop& loop = loops_.at(frame);
      int part = part_of(device);
      Endpoint pred = input_on(device, {loop.loop_cond, 0});
      Graph& g = graph(part);
      int sw = g.add_node(NodeSpec{.name = fresh_name(g, frame + "/_control_loop/switch"),
                                   .op = "Switch",
                                   .inputs = {{cl.merge, 0}, pred},
                                   .attrs = in_frame(frame),
                                   .requested_device = device})
                   .id;
      int next = g.add_node(NodeSpec{.name = fresh_name(g, frame + "/_control_loop/next_iteration"),
                                     .op = "NextIteration",
                                     .inputs = {{sw, 1}},
                                     .attrs = in_frame(frame, {{"parallel_iterations", loop.parallel_iterations}}),
                                     .requested_device = device})
                     .id;
      g.update_input(cl.merge, 1, {next, 0});
      std::vector<int> gate;
      if (std::vector<int> done = done_in_iteration(frame, device); !done.empty())
        gate.push_back(g.add_node(NodeSpec{.name = fresh_name(g, frame + "/_control_loop/iteration_done"),
                                           .op = "NoOp",
                                           .control_inputs = std::move(done),
                                           .attrs = in_frame(frame),
                                           .requested_device = device})
                           .id);
      cl.exit = g.add_node(NodeSpec{.name = fresh_name(g, frame + "/_control_loop/exit"),
                                    .op = "Exit",
                                    .inputs = {{sw, 0}, pred},
                                    .control_inputs = gate,
                                    .attrs = in_frame(loop.parent),
                                    .requested_device = device})
                    .id;
    }
  }

  // What signals, once per iteration of `frame`, that `device` is done with the iteration's
  // frame state: the loop's own iteration gate (where its Exits wait for one), the stack ops
  // of a gradient (they look up the iteration path), and the Exits of the loops nested in it
  // (their frames hang below this one). A device's frame state forgets the frame once its
  // Exits, the control loop's among them, have left, so its Exit waits for these.
  std::vector<int> done_in_iteration(const std::string& frame, const std::string& device) {
    std::vector<int> done;
    for (int c : loops_.at(frame).exit_controls) done.push_back(control_on(device, c));
    for (int id = 0; id < g_.size(); ++id) {
      const Node& n = g_.node(id);
      if (device_of_[id] != device) continue;
      if ((n.op == "StackPush" || n.op == "StackPop") && loop_frame(n) == frame) done.push_back(result_.of[id].node);
      if (n.op == "Exit" && loop_frame(n) == frame && !control_loops_.count({frame_of_work(g_, n), device}))
        done.push_back(result_.of[id].node);  // a nested loop that lies on this device alone
    }
    for (auto& [key, inner] : control_loops_)
      if (key.second == device && loops_.at(key.first).parent == frame) done.push_back(inner.exit);
    return done;
  }

  // Builds node `id` into its device's partition.
  void build(int id, std::vector<std::pair<int, int>>& back_edges) {
    const Node& n = g_.node(id);
    const std::string& device = device_of_[id];
    int part = part_of(device);
    NodeSpec spec{.name = n.name, .op = n.op, .attrs = n.attrs, .requested_device = device};
    for (int slot = 0; slot < int(n.inputs.size()); ++slot) {
      Endpoint in = n.inputs[std::size_t(slot)];
      const Node& p = g_.node(in.node);
      if (p.op == "NextIteration" && device_of_[in.node] != device)
        fail(ErrorCode::internal, "{} on {} and the NextIteration {} feeding it on {} must share a device",
             n.describe(), device, p.describe(), device_of_[in.node]);
      if (is_back_edge(g_, n, slot) && device_of_[in.node] == device && result_.of[in.node].node < 0) {
        if (slot == 0) fail(ErrorCode::internal, "{}: a back edge as the first input", n.describe());
        spec.inputs.push_back(spec.inputs[0]);  // closed once the producer exists
        back_edges.emplace_back(id, slot);
        continue;
      }
      spec.inputs.push_back(input_on(device, in));  // a back edge from another device: a Recv
    }
    for (int c : n.control_inputs) spec.control_inputs.push_back(control_on(device, c));
    result_.of[id] = {part, graph(part).add_node(std::move(spec), &n).id};
  }

  // What a node on `device` reads for the value `in`: the producer itself, a copy of a
  // constant, or a _Recv.
  Endpoint input_on(const std::string& device, Endpoint in) {
    const Node& p = g_.node(in.node);
    if (device_of_[in.node] == device) return {result_.of[in.node].node, in.port};
    int part = part_of(device);
    Graph& g = graph(part);
    if (is_constant_value(p)) {
      auto [it, fresh] = copied_constants_.try_emplace({in.node, part}, -1);
      if (fresh)  // under its own name: p itself is not on this device
        it->second =
            g.add_node(NodeSpec{.name = p.name, .op = p.op, .attrs = p.attrs, .requested_device = device}).id;
      return {it->second, in.port};
    }
    return {recv_on(device, PendingSend{device_of_[in.node], device, in, tensor_name(p, in.port), loop_frame(p)},
                    p.output_types[std::size_t(in.port)], p.output_shapes[std::size_t(in.port)]),
            0};
  }

  // The control input on `device` standing for node `c` (elsewhere: a Recv of its dummy).
  int control_on(const std::string& device, int c) {
    if (device_of_[c] == device) return result_.of[c].node;
    const Node& p = g_.node(c);
    return recv_on(device, PendingSend{device_of_[c], device, {c, -1}, "^" + p.name, loop_frame(p)}, DType::int32,
                   PartialShape(Shape{}));
  }

  // The _Recv on `device` of a value; made once per tensor and device, its _Send later.
  int recv_on(const std::string& device, PendingSend send, DType dtype, const PartialShape& shape) {
    auto key = std::make_pair(send.tensor, device);
    if (auto it = recvs_.find(key); it != recvs_.end()) return it->second;
    int part = part_of(device);
    Graph& g = graph(part);
    // Inside a loop spanning devices, the Recv waits for its device's control loop in the same
    // tag, which has entered the frame here by then: its Merge, which runs every iteration, or
    // for the value of an Enter (iteration 0 only) its Enter.
    std::vector<int> gate;
    if (auto cl = control_loops_.find({send.frame, device}); cl != control_loops_.end()) {
      const bool from_enter = send.value.port >= 0 && g_.node(send.value.node).op == "Enter" &&
                              !get_attr_or<bool>(g_.node(send.value.node).attrs, "is_constant", false);
      gate.push_back(from_enter ? cl->second.enter : cl->second.merge);
    }
    const std::string base = send.value.port < 0 ? g_.node(send.value.node).name + "/_control"
                                                 : fmt::format("{}/_recv{}", g_.node(send.value.node).name, send.value.port);
    int recv = g.add_node(NodeSpec{.name = fresh_name(g, base + "_from_" + short_device(send.from_device)),
                                   .op = "_Recv",
                                   .control_inputs = gate,
                                   .attrs = in_frame(send.frame, {{"send_device", send.from_device},
                                                                  {"recv_device", device},
                                                                  {"tensor_name", send.tensor},
                                                                  {"dtype", dtype},
                                                                  {"shape", shape}}),
                                   .requested_device = device})
                   .id;
    recvs_[key] = recv;
    sends_.push_back(std::move(send));
    return recv;
  }

  void add_send(const PendingSend& s) {
    int part = part_of(s.from_device);
    Graph& g = graph(part);
    const Node& p = g_.node(s.value.node);
    Endpoint value{result_.of[s.value.node].node, s.value.port};
    if (s.value.port < 0) {  // a control edge: a dummy that waits for the source
      value = {g.add_node(NodeSpec{.name = fresh_name(g, p.name + "/_control_dummy_to_" + short_device(s.to_device)),
                                   .op = "Const",
                                   .control_inputs = {result_.of[s.value.node].node},
                                   .attrs = in_frame(s.frame, {{"value", Tensor::scalar<int32_t>(0)}}),
                                   .requested_device = s.from_device})
                   .id,
               0};
    }
    const std::string base = s.value.port < 0 ? p.name + "/_control" : fmt::format("{}/_send{}", p.name, s.value.port);
    g.add_node(NodeSpec{.name = fresh_name(g, base + "_to_" + short_device(s.to_device)),
                        .op = "_Send",
                        .inputs = {value},
                        .attrs = in_frame(s.frame, {{"send_device", s.from_device},
                                                    {"recv_device", s.to_device},
                                                    {"tensor_name", s.tensor}}),
                        .requested_device = s.from_device});
  }

  const Graph& g_;
  const std::vector<std::string>& device_of_;
  std::map<std::string, Loop> loops_;
  Partitions result_;
  std::map<std::string, int> part_index_;
  std::map<std::pair<std::string, std::string>, ControlLoop> control_loops_;  // (frame, device)
  std::map<std::pair<std::string, std::string>, int> recvs_;                  // (tensor, device)
  std::map<std::pair<int, int>, int> copied_constants_;                       // (node, partition)
  std::vector<PendingSend> sends_;
};

}  // namespace

Partitions partition(const Graph& graph, const std::vector<std::string>& device_of) {
  if (int(device_of.size()) != graph.size())
    fail(ErrorCode::internal, "partition: {} devices for {} nodes", device_of.size(), graph.size());
  return Partitioner(graph, device_of).run();
}

Partitions partition(std::shared_ptr<Graph> graph, const std::vector<std::string>& device_of) {
  const bool one_device =
      !device_of.empty() && std::all_of(device_of.begin(), device_of.end(), [&](auto& d) { return d == device_of[0]; });
  if (!one_device || int(device_of.size()) != graph->size()) return partition(*graph, device_of);
  return whole_partition(std::move(graph), device_of[0]);
}

Partitions whole_partition(std::shared_ptr<Graph> graph, const std::string& device) {
  // Nothing crosses a device: the graph is its own partition, with no copy.
  Partitions out;
  out.of.resize(std::size_t(graph->size()));
  for (int id = 0; id < graph->size(); ++id) {
    graph->node(id).requested_device = device;
    out.of[std::size_t(id)] = {0, id};
  }
  out.parts.push_back({device, std::move(graph)});
  return out;
}

std::string rendezvous_key(const Node& n) {
  return fmt::format("{};{};{}", get_attr<std::string>(n.attrs, "send_device", n.name),
                     get_attr<std::string>(n.attrs, "recv_device", n.name),
                     get_attr<std::string>(n.attrs, "tensor_name", n.name));
}

}  // namespace troupe
