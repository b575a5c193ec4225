#include "graph/partial_shape.hpp"

#include "core/error.hpp"

namespace troupe {

bool PartialShape::fully_defined() const {
  if (!dims_) return false;
  for (auto d : *dims_)
    if (d < 0) return false;
  return true;
}

Shape PartialShape::to_shape() const {
  if (!fully_defined())
    fail(ErrorCode::failed_precondition, "shape {} is not fully defined", to_string());
  return Shape(*dims_);
}

int64_t PartialShape::num_elements() const {
  return fully_defined() ? to_shape().num_elements() : -1;
}

bool PartialShape::compatible_with(const Shape& shape) const {
  if (!dims_) return true;
  if (int(dims_->size()) != shape.rank()) return false;
  for (int i = 0; i < shape.rank(); ++i)
    if ((*dims_)[i] >= 0 && (*dims_)[i] != shape[i]) return false;
  return true;
}

bool PartialShape::compatible_with(const PartialShape& other) const {
  if (!dims_ || !other.dims_) return true;
  if (dims_->size() != other.dims_->size()) return false;
  for (std::size_t i = 0; i < dims_->size(); ++i) {
    auto a = (*dims_)[i], b = (*other.dims_)[i];
    if (a >= 0 && b >= 0 && a != b) return false;
  }
  return true;
}

PartialShape PartialShape::merge(const PartialShape& other) const {
  if (!compatible_with(other))
    fail(ErrorCode::invalid_argument, "shapes {} and {} are incompatible", to_string(),
         other.to_string());
  if (!dims_) return other;
  if (!other.dims_) return *this;
  auto out = *dims_;
  for (std::size_t i = 0; i < out.size(); ++i)
    if (out[i] < 0) out[i] = (*other.dims_)[i];
  return from_dims(out);
}

PartialShape PartialShape::relaxed_with(const PartialShape& other) const {
  if (!dims_ || !other.dims_ || dims_->size() != other.dims_->size()) return unknown();
  auto out = *dims_;
  for (std::size_t i = 0; i < out.size(); ++i)
    if (out[i] != (*other.dims_)[i]) out[i] = -1;
  return from_dims(out);
}

bool PartialShape::covers(const PartialShape& other) const {
  if (!dims_) return true;
  if (!other.dims_ || dims_->size() != other.dims_->size()) return false;
  for (std::size_t i = 0; i < dims_->size(); ++i)
    if ((*dims_)[i] >= 0 && (*dims_)[i] != (*other.dims_)[i]) return false;
  return true;
}

std::string PartialShape::to_string() const {
  if (!dims_) return "?";
  std::string s = "[";
  for (std::size_t i = 0; i < dims_->size(); ++i) {
    if (i) s += ",";
    s += (*dims_)[i] < 0 ? "?" : std::to_string((*dims_)[i]);
  }
  return s + "]";
}

PartialShape broadcast_partial(const PartialShape& a, const PartialShape& b) {
  if (!a.rank_known() || !b.rank_known()) return PartialShape::unknown();
  int rank = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(rank);
  for (int i = 0; i < rank; ++i) {
    int ia = a.rank() - rank + i, ib = b.rank() - rank + i;
    int64_t da = ia >= 0 ? a.dim(ia) : 1, db = ib >= 0 ? b.dim(ib) : 1;
    if (da == 1) {
      out[i] = db;
    } else if (db == 1) {
      out[i] = da;
    } else if (da < 0 || db < 0) {
      out[i] = da < 0 ? db : da;  // unknown against n: n if it broadcasts at all
    } else if (da != db) {
      fail(ErrorCode::invalid_argument, "incompatible shapes for broadcasting: {} and {}",
           a.to_string(), b.to_string());
    } else {
      out[i] = da;
    }
  }
  return PartialShape::from_dims(out);
}

}  // namespace troupe
