#include "ops/state/variable.hpp"

#include <map>

#include "graph/gradients.hpp"
#include "ops/array/concat.hpp"
#include "ops/basic.hpp"
#include "ops/kernel.hpp"

namespace troupe {
namespace {

TROUPE_REGISTER_OP(OpDef{
    .name = "VariableV2",
    .stateful = true,
    .variable_op = true,
    .shape_fn = [](InferenceContext& c) {
      c.set_output(0, c.attr<DType>("dtype"), c.attr<PartialShape>("shape"));
    },
    .required_attrs = {"dtype", "shape"}});

void update_shape(InferenceContext& c) {
  DType t = c.attr<DType>("dtype");
  if (c.input_type(0) != t)
    c.error("value has dtype {}, the variable '{}' holds {}", name_of(c.input_type(0)),
            c.attr<std::string>("shared_name"), name_of(t));
  auto& declared = c.attr<PartialShape>("shape");
  bool validate = c.attr_or<bool>("validate_shape", true);
  if (validate && !declared.compatible_with(c.input_shape(0)))
    c.error("value has shape {}, the variable '{}' has shape {}", c.input_shape(0).to_string(),
            c.attr<std::string>("shared_name"), declared.to_string());
  c.set_output(0, t, validate ? declared.merge(c.input_shape(0)) : c.input_shape(0));
}

const bool registered = [] {
  for (const char* name : {"Assign", "AssignAdd", "AssignSub"}) GradientRegistry::global().add_none(name);
  for (const char* name : {"Assign", "AssignAdd", "AssignSub"})
    OpRegistry::global().add(OpDef{.name = name,
                                   .num_inputs = 1,
                                   .stateful = true,
                                   .variable_op = true,
                                   .shape_fn = update_shape,
                                   .required_attrs = {"dtype", "shape", "shared_name"}});
  return true;
}();

Output update(const Scope& scope, const char* op, Output variable, Output value, bool validate) {
  Node* v = variable.node();
  TROUPE_CHECK_ARG(v->op == "VariableV2", "{} needs the output of a Variable, got {}", op,
                   v->describe());
  return &scope.add(op, {value},
                    {{"shared_name", variable_name(*v)},
                     {"dtype", v->attrs.at("dtype")},
                     {"shape", v->attrs.at("shape")},
                     {"validate_shape", validate}},
                    v->name + "/" + op);
}

}  // namespace


namespace {
constexpr const char* kPartitionOfAttr = "_partition_of";
constexpr const char* kPartitionShapeAttr = "_partition_full_shape";
constexpr const char* kPartitionRowAttr = "_partition_row_begin";
}  // namespace

std::optional<VariablePartition> partition_of(const Node& variable) {
  auto it = variable.attrs.find(kPartitionOfAttr);
  if (it == variable.attrs.end()) return std::nullopt;
  return VariablePartition{std::get<std::string>(it->second),
                           get_attr<PartialShape>(variable.attrs, kPartitionShapeAttr, variable.name).to_shape(),
                           get_attr<int64_t>(variable.attrs, kPartitionRowAttr, variable.name)};
}

VariableUpdate variable_update_of(const std::string& op) {
  if (op == "AssignAdd") return VariableUpdate::add;
  if (op == "AssignSub") return VariableUpdate::sub;
  return VariableUpdate::assign;
}

void apply_variable_update(Tensor& value, const Tensor& delta, VariableUpdate update) {
  if (value.dtype() != delta.dtype() || value.shape() != delta.shape())
    fail(ErrorCode::invalid_argument, "update {} does not match the variable's value {}",
         delta.describe(), value.describe());
  visit_dtype(value.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_same_v<T, bool>) {
      fail(ErrorCode::invalid_argument, "cannot add to a bool variable");
    } else {
      using C = std::conditional_t<std::is_same_v<T, half>, float, T>;
      T* v = value.data<T>();
      const T* d = delta.data<T>();
      const int64_t n = value.num_elements();
      if (update == VariableUpdate::add)
        for (int64_t i = 0; i < n; ++i) v[i] = T(C(v[i]) + C(d[i]));
      else
        for (int64_t i = 0; i < n; ++i) v[i] = T(C(v[i]) - C(d[i]));
    }
  });
}

namespace ops {

Output variable(const Scope& scope, PartialShape shape, DType dtype, VariableOptions options) {
  AttrMap attrs{{"shape", std::move(shape)}, {"dtype", dtype}, {"trainable", options.trainable}};
  if (!options.shared_name.empty()) attrs.emplace("shared_name", options.shared_name);
  return &scope.add("VariableV2", {}, std::move(attrs), "Variable");
}

namespace {
constexpr const char* kInitializerAttr = "_initializer";
}  // namespace

std::vector<Output> global_variables(const Graph& g) {
  std::map<std::string, Output> by_name;
  std::vector<std::string> order;
  for (int i = 0; i < g.size(); ++i) {
    Node& n = const_cast<Node&>(g.node(i));
    if (n.op != "VariableV2") continue;
    auto [it, added] = by_name.emplace(variable_name(n), Output(&n, 0));
    if (added) order.push_back(it->first);
    else if (!initializer_of(g, it->second) && initializer_of(g, Output(&n, 0))) it->second = Output(&n, 0);
  }
  std::vector<Output> out;
  for (auto& name : order) out.push_back(by_name.at(name));
  return out;
}

Output variable(const Scope& scope, Output initial_value, VariableOptions options) {
  TROUPE_CHECK_ARG(bool(initial_value), "variable: the initial value is an empty Output");
  TROUPE_CHECK_ARG(initial_value.shape().fully_defined(),
                   "variable: the initial value '{}' has shape {}; a variable needs a fully defined shape",
                   initial_value.name(), initial_value.shape().to_string());
  auto v = variable(scope, initial_value.shape(), initial_value.dtype(), options);
  const std::string relative = v.node()->name.substr(scope.prefix().size());  // added under the prefix
  set_initializer(v, assign(scope.with_op_name(relative + "/initializer"), v, initial_value));
  return v;
}

void set_initializer(Output variable, Output init) {
  TROUPE_CHECK_ARG(variable && variable.node()->op == "VariableV2", "set_initializer needs the output of a Variable, got {}",
                   variable ? variable.node()->describe() : "an empty Output");
  TROUPE_CHECK_ARG(bool(init), "set_initializer: the initializer of '{}' is an empty Output", variable.node()->name);
  variable.node()->attrs[kInitializerAttr] = init.node()->name;
}

Node* initializer_of(const Graph& graph, const Output& variable) {
  if (!variable) return nullptr;
  auto it = variable.node()->attrs.find(kInitializerAttr);
  if (it == variable.node()->attrs.end()) return nullptr;
  return const_cast<Node*>(graph.find(std::get<std::string>(it->second)));
}

Node* variables_initializer(const Scope& scope, const std::vector<Output>& variables) {
  std::vector<Output> inits;
  std::vector<std::string> missing;
  for (auto& v : variables) {
    TROUPE_CHECK_ARG(v && v.node()->op == "VariableV2", "variables_initializer: {} is not a variable",
                     v ? v.node()->describe() : "an empty Output");
    if (Node* init = initializer_of(scope.graph(), v)) inits.push_back(Output(init, 0));
    else missing.push_back("'" + variable_name(*v.node()) + "'");
  }
  TROUPE_CHECK_ARG(missing.empty(),
                   "variables_initializer: {} {} no initial value (make a variable with "
                   "ops::variable(scope, initial_value), or record its initializer with ops::set_initializer)",
                   fmt::join(missing, ", "), missing.size() == 1 ? "has" : "have");
  return group(scope.with_op_name("init"), inits);
}

Node* global_variables_initializer(const Scope& scope) {
  auto variables = global_variables(scope.graph());
  TROUPE_CHECK_ARG(!variables.empty(), "global_variables_initializer: the graph has no variables");
  return variables_initializer(scope, variables);
}

Output read_variable(const Scope& scope, Output variable) {
  Node* v = variable.node();
  TROUPE_CHECK_ARG(v->op == "VariableV2", "read_variable needs the output of a Variable, got {}", v->describe());
  AttrMap attrs = v->attrs;
  attrs["shared_name"] = variable_name(*v);
  attrs["trainable"] = false;  // the Variable node is the one optimizers update
  return &scope.add("VariableV2", {}, std::move(attrs), v->name + "/read");
}

Output assign(const Scope& scope, Output variable, Output value, bool validate_shape) {
  return update(scope, "Assign", variable, value, validate_shape);
}
Output assign_add(const Scope& scope, Output variable, Output delta) {
  return update(scope, "AssignAdd", variable, delta, true);
}
Output assign_sub(const Scope& scope, Output variable, Output delta) {
  return update(scope, "AssignSub", variable, delta, true);
}

PartitionedVariable partitioned_variable(const Scope& scope, const std::string& name, Output initial_value,
                                         int num_parts, VariableOptions options) {
  TROUPE_CHECK_ARG(bool(initial_value), "partitioned_variable '{}': the initial value is an empty Output", name);
  const PartialShape& shape = initial_value.shape();
  TROUPE_CHECK_ARG(shape.fully_defined() && shape.rank() >= 1,
                   "partitioned_variable '{}': the initial value '{}' has shape {}; it needs a fully defined "
                   "shape of rank 1 or more",
                   name, initial_value.name(), shape.to_string());
  TROUPE_CHECK_ARG(num_parts >= 1 && num_parts <= shape.dim(0),
                   "partitioned_variable '{}': {} rows do not split into {} part(s)", name, shape.dim(0), num_parts);
  const std::string full = options.shared_name.empty() ? scope.prefix() + name : options.shared_name;
  // The first rows % num_parts parts take one row more (TensorFlow's fixed-size partitions).
  std::vector<int64_t> sizes(std::size_t(num_parts), shape.dim(0) / num_parts);
  for (int64_t k = 0; k < shape.dim(0) % num_parts; ++k) ++sizes[std::size_t(k)];
  std::vector<Output> rows = num_parts == 1 ? std::vector<Output>{initial_value}
                                            : split(scope.with_op_name(name + "/split"), initial_value, 0, sizes);
  PartitionedVariable out;
  int64_t row_begin = 0;
  for (int k = 0; k < num_parts; ++k) {
    VariableOptions part_options = options;
    if (!options.shared_name.empty()) part_options.shared_name = fmt::format("{}/part_{}", full, k);
    Output part = variable(scope.with_op_name(fmt::format("{}/part_{}", name, k)), rows[k], part_options);
    AttrMap& attrs = part.node()->attrs;
    attrs[kPartitionOfAttr] = full;
    attrs[kPartitionShapeAttr] = shape;
    attrs[kPartitionRowAttr] = row_begin;
    row_begin += sizes[std::size_t(k)];
    out.parts.push_back(part);
  }
  out.value = num_parts == 1 ? out.parts[0] : concat(scope.with_op_name(name), out.parts, 0);
  return out;
}

}  // namespace ops
}  // namespace troupe
