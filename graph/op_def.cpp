#include "graph/op_def.hpp"

#include <algorithm>

namespace troupe {

DType InferenceContext::same_input_types() const {
  for (int i = 1; i < num_inputs(); ++i)
    if (input_types[i] != input_types[0])
      error("inputs must have the same dtype, got {} (input 0) and {} (input {})",
            name_of(input_types[0]), name_of(input_types[i]), i);
  return num_inputs() ? input_types[0] : DType::invalid;
}

OpRegistry& OpRegistry::global() {
  static OpRegistry* registry = new OpRegistry();
  return *registry;
}

void OpRegistry::add(OpDef def) {
  auto name = def.name;
  if (!ops_.emplace(name, std::move(def)).second)
    fail(ErrorCode::already_exists, "op '{}' is registered twice", name);
}

const OpDef* OpRegistry::find(const std::string& name) const {
  auto it = ops_.find(name);
  return it == ops_.end() ? nullptr : &it->second;
}

const OpDef& OpRegistry::get(const std::string& name) const {
  if (auto* def = find(name)) return *def;
  fail(ErrorCode::not_found, "op '{}' is not registered", name);
}

std::vector<std::string> OpRegistry::names() const {
  std::vector<std::string> out;
  for (auto& [name, def] : ops_) out.push_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

namespace shape_fns {

void unchanged(InferenceContext& c) { c.set_output(0, c.input_type(0), c.input_shape(0)); }

void broadcast_binary(InferenceContext& c) {
  DType t = c.same_input_types();
  try {
    c.set_output(0, t, broadcast_partial(c.input_shape(0), c.input_shape(1)));
  } catch (const Error& e) {
    c.error("{}", e.what());
  }
}

void comparison(InferenceContext& c) {
  broadcast_binary(c);
  c.output_types[0] = DType::boolean;
}

void no_outputs(InferenceContext&) {}

}  // namespace shape_fns
}  // namespace troupe
