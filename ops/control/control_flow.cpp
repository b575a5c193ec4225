#include "ops/control/control_flow.hpp"

#include "graph/gradients.hpp"

#include <map>
#include "ops/basic.hpp"
#include "ops/kernel.hpp"
#include "ops/math/elementwise.hpp"

namespace troupe {
namespace {

TROUPE_REGISTER_OP(OpDef{
    .name = "Switch",
    .num_inputs = 2,
    .num_outputs = 2,
    .shape_fn = [](InferenceContext& c) {
      if (c.input_type(1) != DType::boolean) c.error("pred must be bool, got {}", name_of(c.input_type(1)));
      if (c.input_shape(1).rank_known() && c.input_shape(1).rank() != 0)
        c.error("pred must be a scalar, got {}", c.input_shape(1).to_string());
      c.set_output(0, c.input_type(0), c.input_shape(0));
      c.set_output(1, c.input_type(0), c.input_shape(0));
    }});

class SwitchKernel final : public OpKernel {
 public:
  explicit SwitchKernel(const Node&) {}
  void compute(KernelContext& ctx) override {
    bool pred = ctx.input(1).scalar_value<bool>();
    ctx.set_output(pred ? 1 : 0, ctx.input(0));
    ctx.set_dead(pred ? 0 : 1);
  }
};
TROUPE_REGISTER_KERNEL("Switch", DeviceType::cpu, SwitchKernel);

TROUPE_REGISTER_OP(OpDef{
    .name = "Merge",
    .num_inputs = -1,
    .num_outputs = 2,
    .fires_on_first_live_input = true,
    .shape_fn = [](InferenceContext& c) {
      if (c.num_inputs() < 1) c.error("needs at least one input");
      DType t = c.same_input_types();
      // Either input may be the live one, so the output is what every input satisfies (a
      // loop's Merge: what every iteration can have), unless the loop states its invariant.
      PartialShape shape = c.input_shape(0);
      for (int i = 1; i < c.num_inputs(); ++i) shape = shape.relaxed_with(c.input_shape(i));
      if (c.has_attr("shape_invariant")) {
        shape = c.attr<PartialShape>("shape_invariant");
        for (int i = 0; i < c.num_inputs(); ++i)
          if (!shape.covers(c.input_shape(i)))
            c.error("input {} has shape {}, outside the shape invariant {}", i, c.input_shape(i).to_string(),
                    shape.to_string());
      }
      c.set_output(0, t, shape);
      c.set_output(1, DType::int32, Shape{});
    }});

// Gradients. At run time only one side of a Switch/Merge pair is live, and the dead side's
// gradients are dead too, so the same Switch/Merge structure routes them back.
//   Merge: the output's gradient goes to the input that was live (value_index).
//   Switch: the live port's gradient is the data's; pred gets none.
TROUPE_REGISTER_GRADIENT("Merge", [](const Scope& s, const Node& n, const std::vector<Output>& g) {
  auto index = output_of(s, n, 1);
  std::vector<Output> out;
  for (int i = 0; i < int(n.inputs.size()); ++i) {
    auto taken = ops::equal(s, index, ops::constant(s, int32_t(i)));
    out.push_back(ops::switch_(s, g[0], taken)[1]);
  }
  return out;
});
TROUPE_REGISTER_GRADIENT("Switch", [](const Scope& s, const Node&, const std::vector<Output>& g) {
  return std::vector<Output>{ops::merge(s, {g[0], g[1]})[0], Output()};
});

}  // namespace

namespace ops {

std::vector<Output> switch_(const Scope& scope, Output data, Output pred) {
  Node& n = scope.add("Switch", {data, pred});
  return {Output(&n, 0), Output(&n, 1)};
}

std::vector<Output> merge(const Scope& scope, const std::vector<Output>& inputs) {
  Node& n = scope.add("Merge", inputs);
  return {Output(&n, 0), Output(&n, 1)};
}

std::vector<Output> cond(const Scope& scope, Output pred, const std::vector<Output>& inputs,
                         const Branch& then_fn, const Branch& else_fn) {
  TROUPE_CHECK_ARG(pred.dtype() == DType::boolean, "cond: pred must be bool, got {}", name_of(pred.dtype()));
  Scope s = scope.sub("cond");
  // The pivots: live only in the taken branch; every node of a branch depends on its pivot.
  auto pivots = switch_(s.with_op_name("pivot_switch"), pred, pred);
  auto then_pivot = identity(s.with_op_name("pivot_t"), pivots[1]);
  auto else_pivot = identity(s.with_op_name("pivot_f"), pivots[0]);
  std::vector<Output> then_in, else_in;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    auto sw = switch_(s.sub("input_" + std::to_string(i)), inputs[i], pred);
    else_in.push_back(sw[0]);
    then_in.push_back(sw[1]);
  }
  Graph& g = s.graph();
  const int branches_start = g.size();
  auto then_out = then_fn(s.sub("then").with_control_dependencies(std::vector<Output>{then_pivot}), then_in);
  const int else_start = g.size();
  auto else_out = else_fn(s.sub("else").with_control_dependencies(std::vector<Output>{else_pivot}), else_in);
  const int branches_end = g.size();
  // Values from outside the cond that a branch uses enter it through a Switch as well, so the
  // untaken branch sees them dead, and their gradients come back through the Switch's Merge
  // (one live partial per run) rather than as a sum with a dead term.
  std::map<Endpoint, int> switched;
  for (int id = branches_start; id < branches_end; ++id) {
    Node& n = g.node(id);
    for (auto& in : n.inputs) {
      const Node& p = g.node(in.node);
      if (in.node >= pivots[0].node()->id || is_constant_value(p)) continue;
      auto [it, fresh] = switched.try_emplace(in, -1);
      if (fresh) it->second = switch_(s.sub("capture"), Output(&g.node(in.node), in.port), pred)[0].node()->id;
      in = Endpoint{it->second, id < else_start ? 1 : 0};
    }
  }
  TROUPE_CHECK_ARG(then_out.size() == else_out.size(), "cond: the branches return {} and {} outputs",
                   then_out.size(), else_out.size());
  std::vector<Output> out;
  for (std::size_t i = 0; i < then_out.size(); ++i) {
    TROUPE_CHECK_ARG(then_out[i].dtype() == else_out[i].dtype(),
                     "cond: output {} is {} in the then branch and {} in the else branch", i,
                     name_of(then_out[i].dtype()), name_of(else_out[i].dtype()));
    out.push_back(merge(s.sub("merge_" + std::to_string(i)), {else_out[i], then_out[i]})[0]);
  }
  return out;
}

}  // namespace ops
}  // namespace troupe
