// Loops in the dataflow graph: the frame primitives Enter, Exit, NextIteration and LoopCond,
// and the while_loop() builder (ARCHITECTURE.md, "The message that flows"). The node actor
// runs Enter, Exit and NextIteration itself (actors/node_actor.cpp); LoopCond has a kernel.
#include <algorithm>
#include <map>

#include "ops/basic.hpp"
#include "ops/control/control_flow.hpp"
#include "ops/kernel.hpp"

namespace troupe {
namespace {

void like_input_0(InferenceContext& c) { c.set_output(0, c.input_type(0), c.input_shape(0)); }

TROUPE_REGISTER_OP(OpDef{
    .name = "Enter",
    .num_inputs = -1,
    .frame_op = true,
    .shape_fn = [](InferenceContext& c) {
      bool constant = c.attr_or<bool>("is_constant", false);
      if (c.num_inputs() != (constant ? 2 : 1))
        c.error("takes {} input(s) (is_constant = {}), got {}", constant ? 2 : 1, constant, c.num_inputs());
      // A constant Enter's second input is its loop's LoopCond (a back edge, so a rebuilt
      // graph may hold a stand-in there until the loop is closed again).
      if (c.attr<std::string>("frame_name").empty()) c.error("frame_name must not be empty");
      if (c.attr_or<int64_t>("parallel_iterations", 10) < 1) c.error("parallel_iterations must be at least 1");
      like_input_0(c);
    },
    .required_attrs = {"frame_name"}});

TROUPE_REGISTER_OP(OpDef{
    .name = "Exit",
    .num_inputs = 2,
    .frame_op = true,
    .shape_fn = [](InferenceContext& c) {
      if (c.input_type(1) != DType::boolean) c.error("pred must be bool, got {}", name_of(c.input_type(1)));
      like_input_0(c);
    }});

TROUPE_REGISTER_OP(OpDef{
    .name = "NextIteration",
    .num_inputs = 1,
    .frame_op = true,
    .shape_fn = [](InferenceContext& c) {
      if (c.attr_or<int64_t>("parallel_iterations", 10) < 1) c.error("parallel_iterations must be at least 1");
      like_input_0(c);
    }});

TROUPE_REGISTER_OP(OpDef{
    .name = "LoopCond",
    .num_inputs = 1,
    .shape_fn = [](InferenceContext& c) {
      if (c.input_type(0) != DType::boolean) c.error("takes a bool, got {}", name_of(c.input_type(0)));
      if (c.input_shape(0).rank_known() && c.input_shape(0).rank() != 0)
        c.error("takes a scalar, got {}", c.input_shape(0).to_string());
      c.set_output(0, DType::boolean, Shape{});
    }});

class LoopCondKernel final : public OpKernel {
 public:
  explicit LoopCondKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    if (ctx.input(0).num_elements() != 1)
      fail(ErrorCode::invalid_argument, "the loop condition must be a bool scalar, got {}", ctx.input(0).describe());
    ctx.set_output(0, ctx.input(0));
  }
};
TROUPE_REGISTER_KERNEL("LoopCond", DeviceType::cpu, LoopCondKernel);

const std::string kFrameAttr = "_frame";

const std::string& frame_of(const Node& n) {
  static const std::string root;
  auto it = n.attrs.find(kFrameAttr);
  return it == n.attrs.end() ? root : std::get<std::string>(it->second);
}

// A Const the executor hands to this consumer once instead of sending it each step
// (actors/executable.cpp hoists Consts without control inputs, except into Merge and the
// frame ops, which must see a message).
bool hoisted_into(const Node& producer, const Node& consumer) {
  return producer.op == "Const" && producer.control_inputs.empty() && !consumer.op_def->frame_op &&
         !consumer.op_def->fires_on_first_live_input;
}

void add_control(Node& n, int from) {
  auto& c = n.control_inputs;
  if (std::find(c.begin(), c.end(), from) == c.end()) {
    c.push_back(from);
    std::sort(c.begin(), c.end());
  }
}

// The loop's nodes, for the passes that complete it once cond and body are built.
struct LoopNodes {
  std::string frame;
  int parallel_iterations;
  int start;       // first node id of the loop
  int body_start;  // first node of the body side (the switched loop variables)
  std::vector<int> enters, merges, exits, next_iterations;
  int loop_cond;
  int pivot;  // the first switched loop variable: live exactly in iterations that run the body
};

bool is_one_of(const std::vector<int>& ids, int id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

// Every node built inside the loop belongs to its frame, except what nested loops already
// claimed and the loop's Exits (they output to the parent frame; an enclosing loop claims them).
void claim_frame(Graph& g, const LoopNodes& l, int end) {
  for (int id = l.start; id < end; ++id) {
    Node& n = g.node(id);
    if (!is_one_of(l.exits, id) && !n.attrs.count(kFrameAttr)) n.attrs[kFrameAttr] = l.frame;
  }
}

// Values from outside the loop enter it as loop invariants (a constant Enter per value);
// control inputs from outside hold back the loop's Enters instead.
void capture_outside_values(const Scope& s, const LoopNodes& l, int end) {
  Graph& g = s.graph();
  std::map<Endpoint, int> invariant;
  std::vector<int> outside_controls;
  for (int id = l.start; id < end; ++id) {
    if (is_one_of(l.enters, id)) continue;
    Node& n = g.node(id);
    for (auto& in : n.inputs) {
      if (in.node >= l.start || hoisted_into(g.node(in.node), n)) continue;
      auto [it, fresh] = invariant.emplace(in, -1);
      if (fresh) {
        const Node& p = g.node(in.node);
        it->second = g.add_node(NodeSpec{
                              .name = s.unique_name("invariant/" + p.name),
                              .op = "Enter",
                              .inputs = {in, {l.loop_cond, 0}},
                              .control_inputs = {l.merges[0]},
                              .attrs = {{"frame_name", l.frame},
                                        {"is_constant", true},
                                        {"parallel_iterations", int64_t(l.parallel_iterations)},
                                        {kFrameAttr, l.frame}},
                              .requested_device = n.requested_device})
                         .id;
      }
      in = Endpoint{it->second, 0};
    }
    auto outside = std::stable_partition(n.control_inputs.begin(), n.control_inputs.end(),
                                         [&](int c) { return c >= l.start; });
    outside_controls.insert(outside_controls.end(), outside, n.control_inputs.end());
    n.control_inputs.erase(outside, n.control_inputs.end());
  }
  for (int e : l.enters)
    for (int c : outside_controls) add_control(g.node(e), c);
}

// A node of the frame with no input arriving as a message would never learn that an
// iteration began: it gets a control input from the iteration's first Merge (the condition's
// side) or from the pivot (the body's side).
void trigger_each_iteration(Graph& g, const LoopNodes& l) {
  auto edges = g.out_edges();
  for (int id = l.start; id < g.size(); ++id) {
    Node& n = g.node(id);
    if (frame_of(n) != l.frame || !n.control_inputs.empty() || n.op == "Merge" || n.op == "Enter") continue;
    bool messages = std::any_of(n.inputs.begin(), n.inputs.end(),
                                [&](const Endpoint& in) { return !hoisted_into(g.node(in.node), n); });
    if (messages) continue;
    if (n.op == "Const") {
      bool sent = false;  // only where a consumer takes it as a message
      for (auto& port : edges.data[id])
        for (auto& c : port) sent = sent || !hoisted_into(n, g.node(c.node));
      if (!sent && edges.control[id].empty()) continue;
    }
    add_control(n, id >= l.body_start ? l.pivot : l.merges[0]);
  }
}

// parallel_iterations: an iteration has finished when every node of the body has run for
// it, that is when the body's sinks (nodes whose results stay in the frame's iteration) have.
// A NoOp waits for them and tells the NextIterations, which hold an iteration back until
// the one parallel_iterations before it has finished.
void gate_iterations(const Scope& s, const LoopNodes& l) {
  Graph& g = s.graph();
  auto edges = g.out_edges();
  std::vector<int> sinks;
  for (int id = l.body_start; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (frame_of(n) != l.frame || is_one_of(l.next_iterations, id)) continue;
    if (n.op == "Enter" && !get_attr_or<bool>(n.attrs, "is_constant", false)) continue;
    if (n.inputs.empty() && n.control_inputs.empty()) continue;  // a hoisted Const: no actor
    bool sink = true;
    auto stays = [&](int c) { return !is_one_of(l.next_iterations, c) && frame_of(g.node(c)) == l.frame; };
    for (auto& port : edges.data[id])
      for (auto& c : port) sink = sink && !stays(c.node);
    for (int c : edges.control[id]) sink = sink && !stays(c);
    if (sink) sinks.push_back(id);
  }
  if (sinks.empty()) sinks.push_back(l.pivot);
  // One loop variable whose new value is the body's only sink: that value's arrival at the
  // NextIteration already says the iteration has finished, and the gate is left out.
  if (l.next_iterations.size() == 1 && sinks.size() == 1 && g.node(l.next_iterations[0]).inputs[0].node == sinks[0])
    return;
  int gate = g.add_node(NodeSpec{.name = s.unique_name("iteration_done"),
                                 .op = "NoOp",
                                 .control_inputs = sinks,
                                 .attrs = {{kFrameAttr, l.frame}},
                                 .requested_device = g.node(l.pivot).requested_device})
                 .id;
  for (int n : l.next_iterations) add_control(g.node(n), gate);
}

}  // namespace

namespace ops {

Output enter(const Scope& scope, Output data, const std::string& frame_name, int parallel_iterations) {
  return &scope.add("Enter", {data},
                    {{"frame_name", frame_name},
                     {"is_constant", false},
                     {"parallel_iterations", int64_t(parallel_iterations)}});
}

Output exit(const Scope& scope, Output data, Output pred) { return &scope.add("Exit", {data, pred}); }

Output next_iteration(const Scope& scope, Output data, int parallel_iterations) {
  return &scope.add("NextIteration", {data}, {{"parallel_iterations", int64_t(parallel_iterations)}});
}

Output loop_cond(const Scope& scope, Output pred) { return &scope.add("LoopCond", {pred}); }

std::vector<Output> while_loop(const Scope& scope, const LoopCondition& cond, const Branch& body,
                               const std::vector<Output>& loop_vars, WhileOptions o) {
  TROUPE_CHECK_ARG(!loop_vars.empty(), "while_loop '{}': needs at least one loop variable", o.name);
  TROUPE_CHECK_ARG(o.parallel_iterations >= 1, "while_loop '{}': parallel_iterations must be at least 1, got {}",
                   o.name, o.parallel_iterations);
  Graph& g = scope.graph();
  Scope s = scope.sub(o.name);
  LoopNodes l;
  l.frame = s.prefix().substr(0, s.prefix().size() - 1);
  l.parallel_iterations = o.parallel_iterations;
  l.start = g.size();

  std::vector<Output> merged;
  for (std::size_t i = 0; i < loop_vars.size(); ++i) {
    TROUPE_CHECK_ARG(bool(loop_vars[i]), "while_loop '{}': loop variable {} is an empty Output", l.frame, i);
    Scope v = s.sub("var_" + std::to_string(i));
    auto e = enter(v.with_op_name("enter"), loop_vars[i], l.frame, o.parallel_iterations);
    // The second input becomes the NextIteration once the body exists.
    auto m = merge(v.with_op_name("merge"), {e, e});
    l.enters.push_back(e.node()->id);
    l.merges.push_back(m[0].node()->id);
    merged.push_back(m[0]);
  }
  Output pred = cond(s.sub("cond"), merged);
  TROUPE_CHECK_ARG(bool(pred) && pred.dtype() == DType::boolean &&
                       (!pred.shape().rank_known() || pred.shape().rank() == 0),
                   "while_loop '{}': cond must return a bool scalar, got {}", l.frame,
                   pred ? name_of(pred.dtype()) + std::string(" ") + pred.shape().to_string() : "nothing");
  Output lc = loop_cond(s.with_op_name("loop_cond"), pred);
  l.loop_cond = lc.node()->id;
  l.body_start = g.size();
  std::vector<Output> body_in, results;
  for (std::size_t i = 0; i < merged.size(); ++i) {
    Scope v = s.sub("switch_" + std::to_string(i));
    auto sw = switch_(v.with_op_name("switch"), merged[i], lc);
    auto ex = exit(v.with_op_name("exit"), sw[0], lc);
    body_in.push_back(identity(v.with_op_name("body_input"), sw[1]));
    l.exits.push_back(ex.node()->id);
    results.push_back(ex);
  }
  l.pivot = body_in[0].node()->id;
  std::vector<Output> out = body(s.sub("body"), body_in);
  TROUPE_CHECK_ARG(out.size() == loop_vars.size(), "while_loop '{}': body returns {} values for {} loop variables",
                   l.frame, out.size(), loop_vars.size());
  for (std::size_t i = 0; i < out.size(); ++i) {
    TROUPE_CHECK_ARG(bool(out[i]), "while_loop '{}': body returns an empty Output for loop variable {}", l.frame, i);
    TROUPE_CHECK_ARG(out[i].dtype() == loop_vars[i].dtype(),
                     "while_loop '{}': loop variable {} is {} before the loop but the body returns {}", l.frame, i,
                     name_of(loop_vars[i].dtype()), name_of(out[i].dtype()));
    TROUPE_CHECK_ARG(out[i].shape().compatible_with(loop_vars[i].shape()),
                     "while_loop '{}': loop variable {} has shape {} before the loop but the body returns {}",
                     l.frame, i, loop_vars[i].shape().to_string(), out[i].shape().to_string());
    auto next = next_iteration(s.sub("var_" + std::to_string(i) + "_next").with_op_name("next_iteration"), out[i],
                               o.parallel_iterations);
    g.update_input(l.merges[i], 1, next.endpoint());
    l.next_iterations.push_back(next.node()->id);
  }
  int end = g.size();
  claim_frame(g, l, end);
  capture_outside_values(s, l, end);
  trigger_each_iteration(g, l);
  gate_iterations(s, l);
  return results;
}

}  // namespace ops
}  // namespace troupe
