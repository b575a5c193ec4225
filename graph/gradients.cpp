#include "graph/gradients.hpp"

#include <set>

#include <algorithm>
#include <map>

namespace troupe {

GradientRegistry& GradientRegistry::global() {
  static GradientRegistry* registry = new GradientRegistry();
  return *registry;
}

void GradientRegistry::add(const std::string& op, GradientFunction fn) {
  if (find(op) || has_none(op))
    fail(ErrorCode::already_exists, "a gradient for op '{}' is registered twice", op);
  functions_.emplace_back(op, std::move(fn));
}

const GradientFunction* GradientRegistry::find(const std::string& op) const {
  for (auto& [name, fn] : functions_)
    if (name == op) return &fn;
  return nullptr;
}

void GradientRegistry::add_none(const std::string& op) {
  if (find(op) || has_none(op))
    fail(ErrorCode::already_exists, "a gradient for op '{}' is registered twice", op);
  none_.push_back(op);
}

bool GradientRegistry::has_none(const std::string& op) const {
  return std::find(none_.begin(), none_.end(), op) != none_.end();
}

Output input_of(const Scope& scope, const Node& node, int i) {
  Endpoint e = node.inputs.at(std::size_t(i));
  return Output(&scope.graph().node(e.node), e.port);
}

Output output_of(const Scope& scope, const Node& node, int p) {
  return Output(&scope.graph().node(node.id), p);
}

namespace {

// The sum of the partial gradients reaching one output.
Output sum_of(const Scope& scope, const std::vector<Output>& parts) {
  Output total = parts[0];
  for (std::size_t i = 1; i < parts.size(); ++i) total = Output(&scope.add("Add", {total, parts[i]}));
  return total;
}

}  // namespace

std::vector<Output> gradients(const Scope& outer, const std::vector<Output>& ys,
                              const std::vector<Output>& xs, const std::vector<Output>& grad_ys,
                              GradientOptions options) {
  TROUPE_CHECK_ARG(!ys.empty(), "gradients needs at least one y");
  TROUPE_CHECK_ARG(grad_ys.empty() || grad_ys.size() == ys.size(),
                   "gradients: {} grad_ys for {} ys", grad_ys.size(), ys.size());
  Graph& g = outer.graph();
  const int n = g.size();  // nodes added from here on are the gradient's own
  auto edges = g.out_edges();

  // Nodes on a path from some x to some y, over data edges that carry floating values.
  std::vector<char> from_x(n, 0), to_y(n, 0);
  std::vector<int> stack;
  for (auto& x : xs)
    if (!from_x[x.node()->id]) from_x[x.node()->id] = 1, stack.push_back(x.node()->id);
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    for (auto& port : edges.data[id])
      for (auto& c : port)
        if (!from_x[c.node]) from_x[c.node] = 1, stack.push_back(c.node);
  }
  std::vector<char> is_x(n, 0);
  for (auto& x : xs) is_x[x.node()->id] = 1;
  for (auto& y : ys)
    if (!to_y[y.node()->id]) to_y[y.node()->id] = 1, stack.push_back(y.node()->id);
  while (!stack.empty()) {
    int id = stack.back();
    stack.pop_back();
    if (options.stop_at_xs && is_x[id]) continue;
    for (auto& in : g.node(id).inputs)
      if (!to_y[in.node]) to_y[in.node] = 1, stack.push_back(in.node);
  }

  // A while loop's gradient reads the forward values it needs from stacks (StackPush in the
  // forward loop, StackPop in the gradient loop), joined by no data edge: differentiating such
  // a gradient again would miss how those values depend on the xs and give a wrong result,
  // so it is refused.
  std::map<std::string, int> pushed;  // stack name -> the node whose value it saves
  for (int id = 0; id < n; ++id)
    if (g.node(id).op == "StackPush" && !g.node(id).inputs.empty())
      pushed[get_attr_or<std::string>(g.node(id).attrs, "stack_name", "")] = g.node(id).inputs[0].node;
  for (int id = 0; id < n; ++id) {
    const Node& pop = g.node(id);
    if (pop.op != "StackPop" || !to_y[id]) continue;
    auto it = pushed.find(get_attr_or<std::string>(pop.attrs, "stack_name", ""));
    if (it != pushed.end() && from_x[it->second])
      fail(ErrorCode::unimplemented,
           "gradients: second derivatives through the gradient of a while loop are not supported: "
           "{} reads the saved values of '{}', which depend on an x",
           pop.describe(), g.node(it->second).name);
  }

  Scope scope = outer.sub("gradients");
  std::map<Endpoint, std::vector<Output>> partials;
  for (std::size_t i = 0; i < ys.size(); ++i) {
    TROUPE_CHECK_ARG(is_floating(ys[i].dtype()), "gradients: y '{}' has dtype {}, not a floating type",
                     ys[i].name(), name_of(ys[i].dtype()));
    Output seed = grad_ys.empty() ? Output(&scope.add("OnesLike", {ys[i]})) : grad_ys[i];
    partials[ys[i].endpoint()].push_back(seed);
  }

  // In reverse topological order (a node's id is not enough: loops and conds add the Enter or
  // Switch that brings an outside value in after the nodes that read it).
  const std::vector<int> order = g.topological_order();
  // A while loop's Exits, loops whose gradient is built (once, at the first Exit met).
  auto loop_of = [&](const Node& node) -> const std::string& {
    return node.op == "Exit" ? loop_frame(g.node(node.inputs[0].node)) : loop_frame(node);
  };
  std::set<std::string> loops_done;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int id = *it;
    if (id >= n || !from_x[id] || !to_y[id]) continue;
    if (options.stop_at_xs && is_x[id]) continue;
    Node& node = g.node(id);
    if (!loops_done.empty() && loops_done.count(loop_of(node))) continue;
    if (node.op == "Exit") {
      bool any = false;
      for (auto& [e, parts] : partials) any = any || (g.node(e.node).op == "Exit" && loop_of(g.node(e.node)) == loop_of(node));
      if (!any) continue;
      const LoopGradientFunction* fn = GradientRegistry::global().loop_gradient();
      if (!fn) fail(ErrorCode::unimplemented, "gradients: no gradient for while loops is registered ({})", node.describe());
      loops_done.insert(loop_of(node));
      auto grad_of = [&](const Node& exit) -> Output {
        auto it = partials.find({exit.id, 0});
        return it == partials.end() ? Output() : sum_of(scope, it->second);
      };
      std::vector<std::pair<Endpoint, Output>> grads;
      try {
        grads = (*fn)(scope, node, grad_of);
      } catch (const Error& e) {
        throw Error(e.code(), fmt::format("gradient of while loop '{}': {}", loop_of(node), e.what()));
      }
      for (auto& [in, grad] : grads)
        if (grad && from_x[in.node] && is_floating(g.node(in.node).output_types[in.port])) partials[in].push_back(grad);
      continue;
    }
    std::vector<Output> grad_outputs(std::size_t(node.num_outputs()));
    bool any = false;
    for (int p = 0; p < node.num_outputs(); ++p) {
      auto it = partials.find({id, p});
      if (it == partials.end()) continue;
      grad_outputs[p] = sum_of(scope, it->second);
      any = true;
    }
    if (!any || node.inputs.empty()) continue;
    auto& registry = GradientRegistry::global();
    if (registry.has_none(node.op)) continue;
    const GradientFunction* fn = registry.find(node.op);
    if (!fn)
      fail(ErrorCode::unimplemented, "gradients: no gradient is registered for op '{}' (node '{}')",
           node.op, node.name);
    for (int p = 0; p < node.num_outputs(); ++p)
      if (!grad_outputs[p]) grad_outputs[p] = Output(&scope.add("ZerosLike", {Output(&node, p)}));
    std::vector<Output> grad_inputs;
    try {
      grad_inputs = (*fn)(scope, node, grad_outputs);
    } catch (const Error& e) {
      throw Error(e.code(), fmt::format("gradient of {}: {}", node.describe(), e.what()));
    }
    if (grad_inputs.size() != node.inputs.size())
      fail(ErrorCode::internal, "gradient of {} gave {} input gradients for {} inputs",
           node.describe(), grad_inputs.size(), node.inputs.size());
    for (std::size_t i = 0; i < node.inputs.size(); ++i) {
      Endpoint in = node.inputs[i];
      if (!grad_inputs[i] || !from_x[in.node]) continue;
      if (!is_floating(g.node(in.node).output_types[in.port])) continue;
      partials[in].push_back(grad_inputs[i]);
    }
  }

  std::vector<Output> out;
  for (auto& x : xs) {
    auto it = partials.find(x.endpoint());
    out.push_back(it == partials.end() ? Output() : sum_of(scope, it->second));
  }
  return out;
}

}  // namespace troupe
