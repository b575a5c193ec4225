#pragma once
// A shape known only in part, as shape inference sees it: the rank may be unknown, and each
// dimension may be unknown (-1).
#include <optional>
#include <string>
#include <vector>

#include "core/shape.hpp"

namespace troupe {

class PartialShape {
 public:
  // A scalar, as Shape{} is: `{}` means rank 0 wherever a shape is asked for. Say
  // PartialShape::unknown() for a shape of unknown rank.
  PartialShape() : dims_(std::vector<int64_t>{}) {}
  PartialShape(const Shape& shape) : dims_(shape.dims()) {}
  PartialShape(std::initializer_list<int64_t> dims) : dims_(std::vector<int64_t>(dims)) {}
  static PartialShape unknown() {
    PartialShape s;
    s.dims_.reset();
    return s;
  }
  static PartialShape of_rank(int rank) { return from_dims(std::vector<int64_t>(rank, -1)); }
  static PartialShape from_dims(std::vector<int64_t> dims) {
    PartialShape s;
    s.dims_ = std::move(dims);
    return s;
  }

  bool rank_known() const { return dims_.has_value(); }
  int rank() const { return dims_ ? int(dims_->size()) : -1; }
  int64_t dim(int i) const { return (*dims_)[i]; }
  const std::vector<int64_t>& dims() const { return *dims_; }
  bool fully_defined() const;
  Shape to_shape() const;  // throws unless fully defined
  int64_t num_elements() const;  // -1 unless fully defined
  bool compatible_with(const Shape& shape) const;
  bool compatible_with(const PartialShape& other) const;
  // The most specific shape compatible with both; throws when they conflict.
  PartialShape merge(const PartialShape& other) const;
  // The most specific shape that both this and `other` satisfy (TensorFlow's
  // most_specific_compatible_shape): dimensions that differ become unknown, a rank that differs
  // makes the rank unknown. What a value has that may be either.
  PartialShape relaxed_with(const PartialShape& other) const;
  // Whether every shape `other` allows is one this allows (this is `other` or less specific).
  bool covers(const PartialShape& other) const;
  std::string to_string() const;  // "?" for unknown rank, "[2,?]"
  friend bool operator==(const PartialShape& a, const PartialShape& b) { return a.dims_ == b.dims_; }

 private:
  std::optional<std::vector<int64_t>> dims_;
};

// Broadcast of two partial shapes (numpy rules); throws if they cannot broadcast.
PartialShape broadcast_partial(const PartialShape& a, const PartialShape& b);

}  // namespace troupe
