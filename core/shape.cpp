#include "core/shape.hpp"

#include "core/error.hpp"

namespace troupe {

Shape::Shape(std::initializer_list<int64_t> dims) {
  for (auto d : dims) push_back(d);
}

Shape::Shape(const std::vector<int64_t>& dims) {
  for (auto d : dims) push_back(d);
}

void Shape::push_back(int64_t d) {
  if (rank_ == kMaxRank)
    fail(ErrorCode::invalid_argument, "shape rank exceeds the maximum of {}", kMaxRank);
  if (d < 0) fail(ErrorCode::invalid_argument, "negative dimension {} in a shape", d);
  dims_[rank_++] = d;
}

std::string Shape::to_string() const {
  std::string s = "[";
  for (int i = 0; i < rank_; ++i) {
    if (i) s += ",";
    s += std::to_string(dims_[i]);
  }
  return s + "]";
}

bool operator==(const Shape& a, const Shape& b) {
  if (a.rank_ != b.rank_) return false;
  for (int i = 0; i < a.rank_; ++i)
    if (a.dims_[i] != b.dims_[i]) return false;
  return true;
}

Shape broadcast_shapes(const Shape& a, const Shape& b) {
  if (a == b) return a;
  int rank = std::max(a.rank(), b.rank());
  Shape out;  // built in place: a binary kernel asks this at every firing
  for (int i = 0; i < rank; ++i) {
    int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    if (da != db && da != 1 && db != 1)
      fail(ErrorCode::invalid_argument, "incompatible shapes for broadcasting: {} and {}",
           a.to_string(), b.to_string());
    out.push_back(da == 1 ? db : da);
  }
  return out;
}

}  // namespace troupe
