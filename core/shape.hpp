#pragma once
// Shape of a tensor: up to kMaxRank dimensions stored inline, so that passing a Tensor in a
// message never allocates for its shape.
#include <array>
#include <cstdint>
#include <initializer_list>
#include <string>
#include <vector>

namespace troupe {

class Shape {
 public:
  static constexpr int kMaxRank = 8;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims);
  explicit Shape(const std::vector<int64_t>& dims);

  int rank() const { return rank_; }
  int64_t dim(int i) const { return dims_[i]; }
  int64_t operator[](int i) const { return dims_[i]; }
  void set_dim(int i, int64_t value) { dims_[i] = value; }
  int64_t num_elements() const {  // in line: on the path of every firing
    int64_t n = 1;
    for (int i = 0; i < rank_; ++i) n *= dims_[i];
    return n;
  }
  bool is_scalar() const { return rank_ == 0; }
  std::vector<int64_t> dims() const { return {dims_.begin(), dims_.begin() + rank_}; }
  const int64_t* begin() const { return dims_.data(); }
  const int64_t* end() const { return dims_.data() + rank_; }

  void push_back(int64_t d);
  std::string to_string() const;  // "[2,3]"; a scalar is "[]"

  friend bool operator==(const Shape& a, const Shape& b);
  friend bool operator!=(const Shape& a, const Shape& b) { return !(a == b); }

 private:
  std::array<int64_t, kMaxRank> dims_{};
  int rank_ = 0;
};

// The shape two operands broadcast to (numpy rules). Throws invalid_argument naming both.
Shape broadcast_shapes(const Shape& a, const Shape& b);

}  // namespace troupe
