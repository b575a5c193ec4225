#pragma once
// Node attributes: typed values keyed by name (sorted, so equal attributes compare and hash
// equally, which CSE relies on).
#include <cstdint>
#include <map>
#include <string>
#include <variant>
#include <vector>

#include "core/dtype.hpp"
#include "core/tensor.hpp"
#include "graph/partial_shape.hpp"

namespace troupe {

using AttrValue = std::variant<int64_t, double, bool, std::string, DType, PartialShape, Tensor,
                               std::vector<int64_t>, std::vector<double>,
                               std::vector<std::string>, std::vector<DType>>;
using AttrMap = std::map<std::string, AttrValue>;

const char* attr_type_name(const AttrValue& value);
std::string attr_to_string(const AttrValue& value);
bool attr_equal(const AttrValue& a, const AttrValue& b);  // tensors by value
std::size_t attr_hash(const AttrValue& value);

// Reads attribute `name` as T; `owner` names the node for the error message.
template <class T>
const T& get_attr(const AttrMap& attrs, const std::string& name, const std::string& owner) {
  auto it = attrs.find(name);
  if (it == attrs.end())
    fail(ErrorCode::invalid_argument, "node '{}' lacks attribute '{}'", owner, name);
  auto* v = std::get_if<T>(&it->second);
  if (!v)
    fail(ErrorCode::invalid_argument, "attribute '{}' of node '{}' has type {}", name, owner,
         attr_type_name(it->second));
  return *v;
}

template <class T>
T get_attr_or(const AttrMap& attrs, const std::string& name, T fallback) {
  auto it = attrs.find(name);
  if (it == attrs.end()) return fallback;
  auto* v = std::get_if<T>(&it->second);
  return v ? *v : fallback;
}

}  // namespace troupe
