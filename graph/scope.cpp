#include "graph/scope.hpp"

#include <algorithm>

namespace troupe {

Scope Scope::root() { return Scope(std::make_shared<Graph>()); }

Scope::Scope(std::shared_ptr<Graph> graph) : state_(std::make_shared<State>()) {
  state_->graph = std::move(graph);
}

std::string Scope::unique_name(const std::string& base) const {
  std::string candidate = prefix_ + base;
  auto taken = [&](const std::string& s) {
    return state_->graph->has_name(s) || state_->used.count(s) != 0;
  };
  std::string name = candidate;
  int& next = state_->next_suffix[candidate];
  while (taken(name)) name = candidate + "_" + std::to_string(++next);
  state_->used.insert(name);
  return name;
}

Scope Scope::sub(const std::string& name) const {
  TROUPE_CHECK_ARG(!name.empty(), "sub-scope name must not be empty");
  Scope s = *this;
  s.op_name_.clear();
  s.prefix_ = unique_name(name) + "/";
  return s;
}

Scope Scope::with_op_name(const std::string& name) const {
  Scope s = *this;
  s.op_name_ = name;
  return s;
}

Scope Scope::with_device(const std::string& device) const {
  Scope s = *this;
  s.device_ = device;
  return s;
}

Scope Scope::with_control_dependencies(const std::vector<Output>& deps) const {
  Scope s = *this;
  for (auto& d : deps) s.control_deps_.push_back(d.node()->id);
  return s;
}

Scope Scope::with_control_dependencies(const std::vector<Node*>& deps) const {
  Scope s = *this;
  for (auto* d : deps) s.control_deps_.push_back(d->id);
  return s;
}

Scope Scope::colocate_with(const Node& node) const {
  Scope s = *this;
  s.device_.clear();
  std::string entry = "loc:@" + node.name;
  if (std::find(s.colocation_.begin(), s.colocation_.end(), entry) == s.colocation_.end())
    s.colocation_.push_back(std::move(entry));
  return s;
}

Scope Scope::with_float16_transfer(bool on) const {
  Scope s = *this;
  s.float16_transfer_ = on;
  return s;
}

Scope Scope::with_device_function(DeviceFunction fn) const {
  Scope s = *this;
  s.device_function_ = std::move(fn);
  return s;
}

Node& Scope::add(const std::string& op, const std::vector<Output>& inputs, AttrMap attrs,
                 const std::string& name_hint) const {
  NodeSpec spec;
  if (!op_name_.empty()) {
    spec.name = prefix_ + op_name_;
    state_->used.insert(spec.name);
  } else {
    spec.name = unique_name(name_hint.empty() ? op : name_hint);
  }
  spec.op = op;
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    if (!inputs[i])
      fail(ErrorCode::invalid_argument, "{} '{}': input {} is an empty Output", op, spec.name, i);
    int id = inputs[i].node()->id;
    if (id >= state_->graph->size() || &state_->graph->node(id) != inputs[i].node())
      fail(ErrorCode::invalid_argument, "{} '{}': input {} ({}) belongs to another graph", op,
           spec.name, i, inputs[i].node()->name);
    spec.inputs.push_back(inputs[i].endpoint());
  }
  spec.control_inputs = control_deps_;
  spec.attrs = std::move(attrs);
  if (!colocation_.empty()) {
    auto& classes = spec.attrs.try_emplace("_class", std::vector<std::string>{}).first->second;
    if (!std::holds_alternative<std::vector<std::string>>(classes))
      fail(ErrorCode::invalid_argument, "{} '{}': attribute '_class' has type {}, not a list of strings",
           op, spec.name, attr_type_name(classes));
    auto& entries = std::get<std::vector<std::string>>(classes);
    for (auto& entry : colocation_)
      if (std::find(entries.begin(), entries.end(), entry) == entries.end()) entries.push_back(entry);
  }
  if (float16_transfer_) spec.attrs["_float16_transfer"] = true;
  spec.requested_device = device_;
  if (device_function_ && colocation_.empty()) spec.requested_device = device_function_(spec);
  return state_->graph->add_node(std::move(spec));
}

}  // namespace troupe
