// Loops in the dataflow graph: the frame primitives Enter, Exit, NextIteration and LoopCond,
// and the while_loop() builder (docs/architecture.md, "The message that flows"). Node actors of
// their own run Enter, Exit and NextIteration (actors/executor/); LoopCond has a kernel.
#include <algorithm>
#include <map>
#include <set>
#include <vector>

#include "graph/gradients.hpp"
#include "ops/array/array.hpp"
#include "ops/basic.hpp"
#include "ops/control/control_flow.hpp"
#include "ops/kernel.hpp"
#include "ops/math/elementwise.hpp"

namespace troupe {
namespace {

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
      shape_fns::unchanged(c);
    },
    .required_attrs = {"frame_name"}});

TROUPE_REGISTER_OP(OpDef{
    .name = "Exit",
    .num_inputs = 2,
    .num_outputs = 2,
    .frame_op = true,
    .shape_fn = [](InferenceContext& c) {
      if (c.input_type(1) != DType::boolean) c.error("pred must be bool, got {}", name_of(c.input_type(1)));
      shape_fns::unchanged(c);
      c.set_output(1, DType::int32, Shape{});  // how many iterations ran
    }});

// The forward values a loop's gradient needs, saved per iteration: StackPush(value) in the
// forward loop stores the value of each iteration (dead ones too); StackPop(n) in the
// gradient loop, at its iteration j, takes the forward loop's iteration n - 1 - j (n, and
// the counts of the loops around it, are its inputs). Both are run by the node actor on a
// store the executable keeps per step, keyed by the iterations of every enclosing frame.
TROUPE_REGISTER_OP(OpDef{
    .name = "StackPush",
    .num_inputs = 1,
    .num_outputs = 0,
    .stateful = true,
    .frame_op = true,
    .shape_fn = [](InferenceContext&) {},
    .required_attrs = {"stack_name"}});
TROUPE_REGISTER_OP(OpDef{
    .name = "StackPop",
    .num_inputs = -1,
    .stateful = true,
    .frame_op = true,
    .shape_fn = [](InferenceContext& c) {
      if (c.num_inputs() < 1) c.error("takes the iteration count of each forward loop it is inside of");
      for (int i = 0; i < c.num_inputs(); ++i)
        if (c.input_type(i) != DType::int32) c.error("takes the forward loops' iteration counts (int32)");
      c.set_output(0, c.attr<DType>("dtype"), c.attr<PartialShape>("shape"));
    },
    .required_attrs = {"stack_name", "dtype", "shape"}});

TROUPE_REGISTER_OP(OpDef{
    .name = "NextIteration",
    .num_inputs = 1,
    .frame_op = true,
    .shape_fn = [](InferenceContext& c) {
      if (c.attr_or<int64_t>("parallel_iterations", 10) < 1) c.error("parallel_iterations must be at least 1");
      shape_fns::unchanged(c);
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

// A Const the executor hands to this consumer once instead of sending it each step
// (is_constant_value), unless the consumer is a Merge or a frame op, which must see it arrive.
bool hoisted_into(const Node& producer, const Node& consumer) {
  return is_constant_value(producer) && !consumer.op_def->frame_op && !consumer.op_def->fires_on_first_live_input;
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
  int parallel_iterations = 10;
  int start = 0;       // first node id of the loop (while it is built)
  int body_start = 0;  // first node of the body side (the switched loop variables)
  std::vector<int> enters, merges, exits, next_iterations;
  int loop_cond = -1;
  int pivot = -1;  // the first switched loop variable: live exactly in iterations that run the body
};

bool is_one_of(const std::vector<int>& ids, int id) { return std::find(ids.begin(), ids.end(), id) != ids.end(); }

// A loop invariant's Enter (a constant Enter).
bool is_invariant(const Node& n) { return n.op == "Enter" && get_attr_or<bool>(n.attrs, "is_constant", false); }

// The NoOp that says an iteration has finished: it waits for `sinks`, and the loop's
// NextIterations and Exits wait for it. An Exit so leaves only once every iteration has
// finished, and a step ends after all that its loops' bodies did, as TensorFlow's step waits
// for every op it started (before, a step could end, and the next step read a variable, while
// the last iterations' updates of it were still on their way).
// The loop's NextIterations and Exits wait for `gate` (a control input of each), or no longer
// (`wait` false).
void wait_for_gate(Graph& g, const LoopNodes& l, int gate, bool wait = true) {
  for (const std::vector<int>* ids : {&l.next_iterations, &l.exits})
    for (int id : *ids) {
      if (wait) add_control(g.node(id), gate);
      else std::erase(g.node(id).control_inputs, gate);
    }
}

int add_iteration_gate(Graph& g, const std::string& name, const LoopNodes& l, std::vector<int> sinks) {
  int gate = g.add_node(NodeSpec{.name = name,
                                 .op = "NoOp",
                                 .control_inputs = std::move(sinks),
                                 .attrs = {{kLoopFrameAttr, l.frame}},
                                 .requested_device = g.node(l.pivot).requested_device})
                 .id;
  wait_for_gate(g, l, gate);
  return gate;
}

// Whether a body's sink may be its loop's gate itself (gate_iterations): a node that fires
// once per iteration when its inputs are in, as a kernel does.
bool may_gate(const Node& n) {
  return n.op != "Switch" && n.op != "LoopCond" && !n.op_def->frame_op && !n.op_def->fires_on_first_live_input;
}

// A gate that is the body's one sink (gate_iterations) made a NoOp waiting for that sink, so that
// more sinks can join it (a gradient's stack pushes); returns the NoOp.
int gate_as_noop(Graph& g, const std::string& name, const LoopNodes& l, int sink) {
  wait_for_gate(g, l, sink, /*wait=*/false);
  return add_iteration_gate(g, name, l, {sink});
}

// Every node built inside the loop belongs to its frame, except what nested loops already
// claimed and the loop's Exits (they output to the parent frame; an enclosing loop claims them).
void claim_frame(Graph& g, const LoopNodes& l, int end) {
  for (int id = l.start; id < end; ++id) {
    Node& n = g.node(id);
    if (!is_one_of(l.exits, id) && !n.attrs.count(kLoopFrameAttr)) n.attrs[kLoopFrameAttr] = l.frame;
  }
}

// Values from outside the loop enter it as loop invariants (a constant Enter per value);
// control inputs from outside hold back the loop's Enters instead.
void capture_outside_values(const Scope& s, const LoopNodes& l, int end) {
  Graph& g = s.graph();
  std::map<Endpoint, int> invariant;
  std::vector<int> outside_controls;
  // Frames of this loop and of loops built inside it. A node of another frame built meanwhile
  // (a gradient's StackPush, which joins the forward loop it saves values of) is not ours.
  std::set<std::string> owned = {l.frame};
  for (int id = l.start; id < end; ++id)
    if (g.node(id).op == "Enter") owned.insert(get_attr<std::string>(g.node(id).attrs, "frame_name", g.node(id).name));
  for (int id = l.start; id < end; ++id) {
    if (is_one_of(l.enters, id)) continue;
    Node& n = g.node(id);
    if (!loop_frame(n).empty() && !owned.count(loop_frame(n))) continue;
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
                                        {kLoopFrameAttr, l.frame}},
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
    if (loop_frame(n) != l.frame || !n.control_inputs.empty() || n.op == "Merge" || n.op == "Enter") continue;
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
// the one parallel_iterations before it has finished. A sink whose results go only to
// NextIterations (a loop variable's update, such as a counter's add) is left out when others
// remain: it has fired for iteration k before iteration k + 1 starts (k + 1 takes its value),
// so long before k + parallel_iterations may, and in the last iteration its dead value is what
// tells its NextIteration that the loop is over, which the Exits wait for (executable.cpp,
// NodePlan::loop_end). Waiting for it, the gate would wait for the loop's control every
// iteration: on two workers, a message from the worker running the control to the one running
// the iteration's work.
int gate_iterations(const Scope& s, const LoopNodes& l) {
  Graph& g = s.graph();
  auto edges = g.out_edges();
  std::vector<int> sinks;
  for (int id = l.body_start; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (loop_frame(n) != l.frame || is_one_of(l.next_iterations, id)) continue;
    if (n.op == "Enter" && !is_invariant(n)) continue;
    if (n.inputs.empty() && n.control_inputs.empty()) continue;  // a hoisted Const: no actor
    bool sink = true;
    auto stays = [&](int c) { return !is_one_of(l.next_iterations, c) && loop_frame(g.node(c)) == l.frame; };
    for (auto& port : edges.data[id])
      for (auto& c : port) sink = sink && !stays(c.node);
    for (int c : edges.control[id]) sink = sink && !stays(c);
    if (sink) sinks.push_back(id);
  }
  if (sinks.empty()) sinks.push_back(l.pivot);
  // One loop variable whose new value is the body's only sink: that value's arrival at the
  // NextIteration already says the iteration has finished, and the gate is left out.
  if (l.next_iterations.size() == 1 && sinks.size() == 1 && g.node(l.next_iterations[0]).inputs[0].node == sinks[0])
    return -1;
  auto only_updates = [&](int id) {
    if (!edges.control[id].empty()) return false;
    bool any = false;
    for (auto& port : edges.data[id])
      for (auto& c : port) {
        if (!is_one_of(l.next_iterations, c.node)) return false;
        any = true;
      }
    return any;
  };
  std::vector<int> work;
  for (int id : sinks)
    if (!only_updates(id)) work.push_back(id);
  if (!work.empty()) sinks = std::move(work);
  // One sink left (a body's one piece of work, as a sum it reports): its own control output
  // tells the NextIterations and Exits, and no NoOp takes a turn, a mailbox's lock and, on two
  // workers, a hop of its own every iteration for it. Not a frame op's or a Merge's: what they
  // send when they fire is not the end of their iteration.
  if (sinks.size() == 1 && may_gate(g.node(sinks[0]))) {
    wait_for_gate(g, l, sinks[0]);
    return sinks[0];
  }
  return add_iteration_gate(g, s.unique_name("iteration_done"), l, std::move(sinks));
}

// The loop's structure, kept on its LoopCond node by node name (names survive GraphDef export
// and import, ids need not), for the loop's gradient.
void remember(Graph& g, const LoopNodes& l, const std::vector<int>& body_inputs, int gate) {
  auto names = [&](const std::vector<int>& ids) {
    std::vector<std::string> out;
    for (int id : ids) out.push_back(g.node(id).name);
    return out;
  };
  AttrMap& a = g.node(l.loop_cond).attrs;
  a["_loop_enters"] = names(l.enters);
  a["_loop_merges"] = names(l.merges);
  a["_loop_exits"] = names(l.exits);
  a["_loop_next"] = names(l.next_iterations);
  a["_loop_body_inputs"] = names(body_inputs);
  a["_loop_pivot"] = g.node(l.pivot).name;
  a["_loop_gate"] = gate >= 0 ? g.node(gate).name : std::string();
  a["_loop_parallel_iterations"] = int64_t(l.parallel_iterations);
}

// The loops whose gradient is being built on this thread, outermost first: a loop nested in
// one of them is differentiated inside the outer one's gradient loop, and its saved values are
// found by the iterations of all of them.
struct GradientContext {
  std::string frame;
  Output count;  // the forward loop's iteration count
};
thread_local std::vector<GradientContext> gradient_contexts;

// The gradient of a while loop (TensorFlow's, OSDI'16 §4.3): a loop that runs the forward
// loop's iterations backwards. Its iteration j computes the gradient of the forward body of
// iteration n - 1 - j with the forward values that body used, which the forward loop saved on
// stacks (StackPush) and the gradient loop takes back (StackPop); the gradients of the loop
// invariants are summed over the iterations.
std::vector<std::pair<Endpoint, Output>> loop_gradient(const Scope& scope, const Node& some_exit,
                                                       const std::function<Output(const Node&)>& grad_of_exit) {
  using ops::add, ops::constant, ops::less, ops::while_loop, ops::zeros_like;
  Graph& g = scope.graph();
  const int lc_id = some_exit.inputs[1].node;
  const AttrMap& a = g.node(lc_id).attrs;
  LoopNodes l;
  l.frame = loop_frame(g.node(lc_id));
  l.loop_cond = lc_id;
  auto ids = [&](const char* attr) {
    std::vector<int> out;
    for (auto& name : get_attr<std::vector<std::string>>(a, attr, l.frame)) out.push_back(g.find(name)->id);
    return out;
  };
  l.enters = ids("_loop_enters");
  l.merges = ids("_loop_merges");
  l.exits = ids("_loop_exits");
  l.next_iterations = ids("_loop_next");
  auto body_inputs = ids("_loop_body_inputs");
  l.pivot = g.find(get_attr<std::string>(a, "_loop_pivot", l.frame))->id;
  const std::string gate_name = get_attr<std::string>(a, "_loop_gate", l.frame);
  int gate = gate_name.empty() ? -1 : g.find(gate_name)->id;
  l.parallel_iterations = int(get_attr<int64_t>(a, "_loop_parallel_iterations", l.frame));
  // A loop inside another is differentiated as part of the outer loop's gradient, inside its
  // gradient loop (the gradient contexts say which loops are being differentiated).
  std::string enclosing;
  for (int e : l.enters)
    if (enclosing.empty()) enclosing = loop_frame(g.node(g.node(e).inputs[0].node));
  if (!enclosing.empty() && (gradient_contexts.empty() || gradient_contexts.back().frame != enclosing))
    fail(ErrorCode::unimplemented,
         "the gradient of a while loop inside another ('{}') is built only within the gradient of the outer loop",
         enclosing);

  std::vector<int> vars;  // the floating loop variables (others carry no gradient)
  for (int i = 0; i < int(l.exits.size()); ++i)
    if (is_floating(g.node(l.exits[i]).output_types[0])) vars.push_back(i);
  std::vector<int> invariants;
  for (int id = 0; id < g.size(); ++id) {  // the loop's nodes are found by frame (ids differ after import)
    const Node& n = g.node(id);
    if (is_invariant(n) && loop_frame(n) == l.frame && is_floating(n.output_types[0])) invariants.push_back(id);
  }
  Output count(&g.node(l.exits[0]), 1);

  std::vector<Output> init = {constant(scope, int32_t(0))};
  for (int i : vars) {
    Output seed = grad_of_exit(g.node(l.exits[i]));
    init.push_back(seed ? seed : zeros_like(scope, Output(&g.node(l.exits[i]), 0)));
  }
  for (int c : invariants) init.push_back(zeros_like(scope, Output(&g.node(g.node(c).inputs[0].node), g.node(c).inputs[0].port)));

  std::map<Endpoint, Output> popped;
  std::vector<std::pair<Endpoint, std::string>> saved;
  auto body = [&](const Scope& s, const std::vector<Output>& v) {
    std::vector<Output> xs, ys, seeds;
    for (std::size_t k = 0; k < vars.size(); ++k) {
      xs.push_back(Output(&g.node(body_inputs[vars[k]]), 0));
      const Endpoint o = g.node(l.next_iterations[vars[k]]).inputs[0];
      ys.push_back(Output(&g.node(o.node), o.port));
      seeds.push_back(v[1 + k]);
    }
    for (int c : invariants) xs.push_back(Output(&g.node(c), 0));
    const int from = g.size();
    auto grads = gradients(s, ys, xs, seeds, {.stop_at_xs = true});
    const int to = g.size();
    // The forward values the gradient reads come from the stacks (an invariant's from outside).
    for (int id = from; id < to; ++id) {
      Node& m = g.node(id);
      for (auto& in : m.inputs) {
        const Node& p = g.node(in.node);
        if (loop_frame(p) != l.frame || is_constant_value(p)) continue;
        if (is_invariant(p)) {
          in = p.inputs[0];
          continue;
        }
        auto [it, fresh] = popped.try_emplace(in);
        if (fresh) {
          const std::string stack = s.unique_name("stack/" + p.name + "_" + std::to_string(in.port));
          saved.push_back({in, stack});  // its StackPush joins the forward loop once this loop is built
          std::vector<Output> counts;  // this loop's, then those of the loops around it
          for (auto c = gradient_contexts.rbegin(); c != gradient_contexts.rend(); ++c) counts.push_back(c->count);
          it->second = Output(&s.add("StackPop", counts,
                                     {{"stack_name", stack},
                                      {"dtype", p.output_types[in.port]},
                                      {"shape", p.output_shapes[in.port]}},
                                     "stack_pop"));
        }
        in = it->second.endpoint();
      }
      std::erase_if(m.control_inputs, [&](int c) { return loop_frame(g.node(c)) == l.frame; });
    }
    std::vector<Output> next = {add(s, v[0], constant(s, int32_t(1)))};
    for (std::size_t k = 0; k < vars.size(); ++k) next.push_back(grads[k] ? grads[k] : zeros_like(s, v[1 + k]));
    for (std::size_t c = 0; c < invariants.size(); ++c) {
      Output d = grads[vars.size() + c];
      next.push_back(d ? add(s, v[1 + vars.size() + c], d) : v[1 + vars.size() + c]);
    }
    return next;
  };
  gradient_contexts.push_back({l.frame, count});
  struct Leave {
    ~Leave() { gradient_contexts.pop_back(); }
  } leave;
  auto back = while_loop(
      scope, [&](const Scope& s, const std::vector<Output>& v) { return less(s, v[0], count); }, body, init,
      {.parallel_iterations = l.parallel_iterations, .name = "while_grad"});

  // The forward loop now saves those values, and waits for it: each push is a sink of the
  // iteration gate, and the Exits wait for every iteration to finish, so the gradient loop
  // finds every value saved.
  std::vector<int> pushes;
  for (auto& [value, stack] : saved)
    pushes.push_back(g.add_node(NodeSpec{.name = stack + "/push",
                                         .op = "StackPush",
                                         .inputs = {value},
                                         .attrs = {{"stack_name", stack}, {kLoopFrameAttr, l.frame}},
                                         .requested_device = g.node(value.node).requested_device})
                         .id);
  if (!pushes.empty()) {
    auto name = [&] { return scope.unique_name(l.frame + "/iteration_done"); };
    if (gate < 0) {  // the loop had none: its one sink was the new value (gate_iterations)
      gate = add_iteration_gate(g, name(), l, {g.node(l.next_iterations[0]).inputs[0].node});
      g.node(lc_id).attrs["_loop_gate"] = g.node(gate).name;
    } else if (g.node(gate).op != "NoOp") {  // its one sink was its gate
      gate = gate_as_noop(g, name(), l, gate);
      g.node(lc_id).attrs["_loop_gate"] = g.node(gate).name;
    }
    for (int p : pushes) add_control(g.node(gate), p);
  }

  std::vector<std::pair<Endpoint, Output>> out;
  for (std::size_t k = 0; k < vars.size(); ++k) out.push_back({g.node(l.enters[vars[k]]).inputs[0], back[1 + k]});
  for (std::size_t c = 0; c < invariants.size(); ++c)
    out.push_back({g.node(invariants[c]).inputs[0], back[1 + vars.size() + c]});
  return out;
}

const bool loop_gradient_registered = [] {
  GradientRegistry::global().set_loop_gradient(loop_gradient);
  return true;
}();

// The body was built against the loop variables' shapes before the loop; each Merge now also
// sees what the body returns and may have relaxed (start [2], body returns [?]). Inferring the
// loop's nodes again, in order, until nothing changes gives every node of the loop a shape
// that holds in every iteration. Each round only makes shapes less specific, so it ends.
void relax_loop_shapes(Graph& g, const LoopNodes& l, int end) {
  for (int round = 0;; ++round) {
    bool changed = false;
    for (int id = l.start; id < end; ++id) {
      Node& n = g.node(id);
      auto before = n.output_shapes;
      try {
        infer_shapes(g, n);
      } catch (const Error& e) {
        fail(e.code(), "while_loop '{}': with the loop variables' shapes relaxed to what every iteration can have: {}",
             l.frame, e.what());
      }
      changed |= n.output_shapes != before;
    }
    if (!changed) return;
    if (round == 64) fail(ErrorCode::internal, "while_loop '{}': the loop's shapes do not settle", l.frame);
  }
}

}  // namespace

namespace ops {

Output enter(const Scope& scope, Output data, const std::string& frame_name, int parallel_iterations) {
  return &scope.add("Enter", {data},
                    {{"frame_name", frame_name},
                     {"is_constant", false},
                     {"parallel_iterations", int64_t(parallel_iterations)}});
}

Output exit(const Scope& scope, Output data, Output pred) { return Output(&scope.add("Exit", {data, pred}), 0); }

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

  auto& invariants = o.shape_invariants;
  TROUPE_CHECK_ARG(invariants.empty() || invariants.size() == loop_vars.size(),
                   "while_loop '{}': {} shape invariants for {} loop variables", l.frame, invariants.size(),
                   loop_vars.size());
  std::vector<Output> merged;
  for (std::size_t i = 0; i < loop_vars.size(); ++i) {
    TROUPE_CHECK_ARG(bool(loop_vars[i]), "while_loop '{}': loop variable {} is an empty Output", l.frame, i);
    AttrMap merge_attrs;
    if (!invariants.empty()) {
      TROUPE_CHECK_ARG(invariants[i].covers(loop_vars[i].shape()),
                       "while_loop '{}': the shape invariant {} of loop variable {} does not cover its shape "
                       "before the loop, {}",
                       l.frame, invariants[i].to_string(), i, loop_vars[i].shape().to_string());
      merge_attrs["shape_invariant"] = invariants[i];
    }
    Scope v = s.sub("var_" + std::to_string(i));
    auto e = enter(v.with_op_name("enter"), loop_vars[i], l.frame, o.parallel_iterations);
    // The second input becomes the NextIteration once the body exists.
    Node& merge_node = v.with_op_name("merge").add("Merge", {e, e}, merge_attrs);
    std::vector<Output> m{Output(&merge_node, 0), Output(&merge_node, 1)};
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
    TROUPE_CHECK_ARG(invariants.empty() || invariants[i].covers(out[i].shape()),
                     "while_loop '{}': loop variable {} has the shape invariant {} but the body returns {}; "
                     "state a less specific invariant (an unknown dimension is -1)",
                     l.frame, i, invariants[i].to_string(), out[i].shape().to_string());
    auto next = next_iteration(s.sub("var_" + std::to_string(i) + "_next").with_op_name("next_iteration"), out[i],
                               o.parallel_iterations);
    g.update_input(l.merges[i], 1, next.endpoint());
    l.next_iterations.push_back(next.node()->id);
  }
  int end = g.size();
  relax_loop_shapes(g, l, end);
  claim_frame(g, l, end);
  capture_outside_values(s, l, end);
  trigger_each_iteration(g, l);
  std::vector<int> body_input_ids;
  for (auto& b : body_in) body_input_ids.push_back(b.node()->id);
  remember(g, l, body_input_ids, gate_iterations(s, l));
  return results;
}

}  // namespace ops
}  // namespace troupe
