#include "graph/attr.hpp"

#include <functional>

namespace troupe {
namespace {

template <class T>
std::string join(const std::vector<T>& v) {
  std::string s = "[";
  for (std::size_t i = 0; i < v.size(); ++i) {
    if (i) s += ",";
    if constexpr (std::is_same_v<T, DType>)
      s += name_of(v[i]);
    else
      s += fmt::format("{}", v[i]);
  }
  return s + "]";
}

void mix(std::size_t& seed, std::size_t h) { seed ^= h + 0x9e3779b97f4a7c15ull + (seed << 6) + (seed >> 2); }

}  // namespace

const char* attr_type_name(const AttrValue& v) {
  static const char* names[] = {"int",    "float",   "bool",         "string",
                                "dtype",  "shape",   "tensor",       "list(int)",
                                "list(float)", "list(string)", "list(dtype)"};
  return names[v.index()];
}

std::string attr_to_string(const AttrValue& value) {
  return std::visit(
      [](const auto& v) -> std::string {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, DType>) return name_of(v);
        else if constexpr (std::is_same_v<T, PartialShape>) return v.to_string();
        else if constexpr (std::is_same_v<T, Tensor>) return v.to_string(8);
        else if constexpr (std::is_same_v<T, std::string>) return "\"" + v + "\"";
        else if constexpr (std::is_same_v<T, std::vector<int64_t>> ||
                           std::is_same_v<T, std::vector<double>> ||
                           std::is_same_v<T, std::vector<std::string>> ||
                           std::is_same_v<T, std::vector<DType>>)
          return join(v);
        else return fmt::format("{}", v);
      },
      value);
}

bool attr_equal(const AttrValue& a, const AttrValue& b) {
  if (a.index() != b.index()) return false;
  if (auto* ta = std::get_if<Tensor>(&a)) {
    auto& tb = std::get<Tensor>(b);
    if (ta->dtype() != tb.dtype() || ta->shape() != tb.shape()) return false;
    if (!ta->is_initialized() || !tb.is_initialized()) return ta->is_initialized() == tb.is_initialized();
    if (!ta->host_accessible() || !tb.host_accessible()) return ta->shares_buffer_with(tb);
    return std::memcmp(ta->raw_data(), tb.raw_data(), ta->byte_size()) == 0;
  }
  return std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, Tensor>) return false;  // handled above
        else return x == std::get<T>(b);
      },
      a);
}

std::size_t attr_hash(const AttrValue& value) {
  std::size_t seed = value.index();
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, Tensor>) {
          mix(seed, std::size_t(v.dtype()));
          for (auto d : v.shape()) mix(seed, std::hash<int64_t>{}(d));
          if (v.is_initialized() && v.host_accessible()) {
            auto* p = static_cast<const unsigned char*>(v.raw_data());
            std::size_t n = std::min<std::size_t>(v.byte_size(), 256);
            mix(seed, std::hash<std::string_view>{}(std::string_view((const char*)p, n)));
          }
        } else if constexpr (std::is_same_v<T, PartialShape>) {
          mix(seed, std::hash<std::string>{}(v.to_string()));
        } else if constexpr (std::is_same_v<T, DType>) {
          mix(seed, std::size_t(v));
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>> ||
                             std::is_same_v<T, std::vector<double>> ||
                             std::is_same_v<T, std::vector<std::string>>) {
          for (auto& x : v) mix(seed, std::hash<std::decay_t<decltype(x)>>{}(x));
        } else if constexpr (std::is_same_v<T, std::vector<DType>>) {
          for (auto x : v) mix(seed, std::size_t(x));
        } else {
          mix(seed, std::hash<T>{}(v));
        }
      },
      value);
  return seed;
}

}  // namespace troupe
