#pragma once
// OpDef: what an op is, independent of any kernel: its inputs and outputs, whether it has
// state, and its shape function, which gives the dtype and (partial) shape of each output from
// those of the inputs and the attributes. Ops register themselves where they are defined
// (ops/*.cpp) with TROUPE_REGISTER_OP; the registry is filled during static initialisation and
// read-only afterwards.
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "graph/attr.hpp"

namespace troupe {

class InferenceContext {
 public:
  InferenceContext(const std::string& node_name, const std::string& op, const AttrMap& attrs)
      : node_name_(node_name), op_(op), attrs_(attrs) {}

  const std::string& node_name() const { return node_name_; }
  const AttrMap& attrs() const { return attrs_; }
  template <class T>
  const T& attr(const std::string& name) const { return get_attr<T>(attrs_, name, node_name_); }
  template <class T>
  T attr_or(const std::string& name, T fallback) const { return get_attr_or<T>(attrs_, name, fallback); }
  bool has_attr(const std::string& name) const { return attrs_.count(name) != 0; }

  int num_inputs() const { return int(input_types.size()); }
  DType input_type(int i) const { return input_types[i]; }
  const PartialShape& input_shape(int i) const { return input_shapes[i]; }
  // The value of input i when its producer is a Const, else nullptr.
  const Tensor* input_value(int i) const { return input_values[i]; }

  void set_output(int i, DType dtype, PartialShape shape) {
    if (int(output_types.size()) <= i) {
      output_types.resize(i + 1, DType::invalid);
      output_shapes.resize(i + 1, PartialShape::unknown());
    }
    output_types[i] = dtype;
    output_shapes[i] = std::move(shape);
  }

  // Throws invalid_argument prefixed with the op and node: "MatMul 'dense/matmul': ...".
  template <class... Args>
  [[noreturn]] void error(fmt::format_string<Args...> format, Args&&... args) const {
    fail(ErrorCode::invalid_argument, "{} '{}': {}", op_, node_name_,
         fmt::format(format, std::forward<Args>(args)...));
  }
  // All inputs must share one dtype; returns it.
  DType same_input_types() const;

  std::vector<DType> input_types;
  std::vector<PartialShape> input_shapes;
  std::vector<const Tensor*> input_values;
  std::vector<DType> output_types;
  std::vector<PartialShape> output_shapes;

 private:
  const std::string& node_name_;
  const std::string& op_;
  const AttrMap& attrs_;
};

struct OpDef {
  std::string name;
  int num_inputs = 0;        // -1: any number (the shape function checks)
  int num_outputs = 1;       // -1: given by num_outputs_fn
  std::function<int(const AttrMap&)> num_outputs_fn;
  bool stateful = false;     // not merged by CSE; output may differ between runs
  bool variable_op = false;  // executed by messages to a parameter shard, not by a kernel
  bool queue_op = false;     // executed by messages to a queue actor (ops/data/queue.hpp)
  // Merge: fires on the first live data input of a tag instead of waiting for all (the node
  // actor does this itself; there is no kernel).
  bool fires_on_first_live_input = false;
  // Enter, Exit, NextIteration: move values between frames and iterations; node actors of
  // their own do this (actors/executor/); there is no kernel.
  bool frame_op = false;
  std::function<void(InferenceContext&)> shape_fn;
  std::vector<std::string> required_attrs;

  int outputs_for(const AttrMap& attrs) const {
    return num_outputs >= 0 ? num_outputs : num_outputs_fn(attrs);
  }
};

class OpRegistry {
 public:
  static OpRegistry& global();
  void add(OpDef def);  // throws already_exists
  const OpDef* find(const std::string& name) const;
  const OpDef& get(const std::string& name) const;  // throws not_found
  std::vector<std::string> names() const;

 private:
  std::unordered_map<std::string, OpDef> ops_;
};

namespace detail {
struct OpRegistrar {
  explicit OpRegistrar(OpDef def) { OpRegistry::global().add(std::move(def)); }
};
}  // namespace detail

#define TROUPE_CONCAT_INNER(a, b) a##b
#define TROUPE_CONCAT(a, b) TROUPE_CONCAT_INNER(a, b)
// TROUPE_REGISTER_OP(OpDef{.name = "Add", ...});
#define TROUPE_REGISTER_OP(...) \
  static const ::troupe::detail::OpRegistrar TROUPE_CONCAT(op_registrar_, __COUNTER__){__VA_ARGS__}

// Shape functions shared by many ops.
namespace shape_fns {
void unchanged(InferenceContext& c);       // output 0 = input 0
void broadcast_binary(InferenceContext& c);  // same dtype, numpy broadcast
void comparison(InferenceContext& c);      // broadcast, bool output
void no_outputs(InferenceContext& c);
}  // namespace shape_fns

}  // namespace troupe
