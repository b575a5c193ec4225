#pragma once
// Tensor: a dtype, a shape and a reference-counted buffer on some device. Copying a Tensor
// shares the buffer (no bytes are copied); slice() and reshaped() are zero-copy views.
// A Tensor is safe to read from several threads; writing through data<T>() is the business
// of whoever holds the only reference (see buffer_use_count()).
#include <atomic>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "core/allocator.hpp"
#include "core/dtype.hpp"
#include "core/error.hpp"
#include "core/shape.hpp"

namespace troupe {

class Buffer {
 public:
  static Buffer* create(Allocator& allocator, std::size_t bytes);
  void add_ref() { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Drops a reference; the last one frees the buffer (out of line). A holder that finds itself
  // the only one frees it without the atomic exchange (no other thread can add a reference
  // without holding one): most values die with one holder, and the exchange is a large part
  // of a chain node's firing outside its kernel.
  void release() {
    if (refs_.load(std::memory_order_acquire) == 1 || refs_.fetch_sub(1, std::memory_order_acq_rel) == 1)
      destroy();
  }
  int use_count() const { return refs_.load(std::memory_order_acquire); }
  void* data() const { return data_; }
  std::size_t bytes() const { return bytes_; }
  Allocator& allocator() const { return *allocator_; }

 private:
  Buffer() = default;
  void destroy();
  static constexpr std::size_t kInlineBytes = 32;
  std::atomic<int> refs_{1};
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
  Allocator* allocator_ = nullptr;
  alignas(16) unsigned char inline_[kInlineBytes];
};

class Tensor {
 public:
  Tensor() = default;
  // Uninitialised storage for dtype and shape on the allocator's device.
  Tensor(DType dtype, Shape shape, Allocator& allocator = host_allocator());
  // Copies share the buffer; all of these are on the path of every value an executor passes.
  Tensor(const Tensor& o) : buffer_(o.buffer_), offset_(o.offset_), shape_(o.shape_), dtype_(o.dtype_) {
    if (buffer_) buffer_->add_ref();
  }
  Tensor(Tensor&& o) noexcept : buffer_(o.buffer_), offset_(o.offset_), shape_(o.shape_), dtype_(o.dtype_) {
    o.buffer_ = nullptr;
  }
  Tensor& operator=(const Tensor& other);
  Tensor& operator=(Tensor&& o) noexcept {
    if (this != &o) {
      if (buffer_) buffer_->release();
      buffer_ = o.buffer_;
      offset_ = o.offset_;
      shape_ = o.shape_;
      dtype_ = o.dtype_;
      o.buffer_ = nullptr;
    }
    return *this;
  }
  ~Tensor() {
    if (buffer_) buffer_->release();
  }
  // Lets go of the buffer: the tensor is empty after it (as Tensor() is, without writing the
  // rest of it).
  void reset() {
    if (buffer_) buffer_->release();
    buffer_ = nullptr;
  }

  template <class T>
  static Tensor scalar(T value);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values, Shape shape);
  template <class T>
  static Tensor from_vector(const std::vector<T>& values) {
    return from_vector(values, Shape{int64_t(values.size())});
  }
  static Tensor zeros(DType dtype, Shape shape);

  bool is_initialized() const { return buffer_ != nullptr; }
  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t num_elements() const { return shape_.num_elements(); }
  std::size_t byte_size() const { return std::size_t(num_elements()) * size_of(dtype_); }
  const std::string& device_name() const;
  bool host_accessible() const;

  void* raw_data() const {  // in line: every kernel asks it of each operand
    if (!buffer_) [[unlikely]] no_data();
    return static_cast<char*>(buffer_->data()) + offset_;
  }
  template <class T>
  T* data() const {
    check_dtype(dtype_v<T>);
    return static_cast<T*>(raw_data());
  }
  template <class T>
  T scalar_value() const;  // the one element of a tensor with one element
  template <class T>
  std::vector<T> to_vector() const {
    auto p = data<T>();
    return std::vector<T>(p, p + num_elements());
  }

  // Rows [begin, end) along the first dimension, sharing this tensor's buffer.
  Tensor slice(int64_t begin, int64_t end) const;
  // The same elements under another shape with the same number of elements, shared.
  Tensor reshaped(Shape shape) const;
  // A deep copy into a fresh buffer on the same device.
  Tensor copy() const;

  int buffer_use_count() const { return buffer_ ? buffer_->use_count() : 0; }
  bool shares_buffer_with(const Tensor& other) const { return buffer_ && buffer_ == other.buffer_; }
  // Whether the buffer is the allocator's (an empty tensor is on none).
  bool is_on(const Allocator& allocator) const { return buffer_ && &buffer_->allocator() == &allocator; }

  // "float32[2,3] {1, 2, 3, 4, 5, 6}", eliding after max_elements.
  std::string to_string(int64_t max_elements = 16) const;
  std::string describe() const;  // "float32[2,3]"

  void check_dtype(DType expected) const {
    if (dtype_ != expected) dtype_mismatch(expected);
  }

 private:
  [[noreturn]] void dtype_mismatch(DType expected) const;
  [[noreturn]] static void no_data();

  Buffer* buffer_ = nullptr;
  std::size_t offset_ = 0;  // bytes into buffer_
  Shape shape_;
  DType dtype_ = DType::invalid;
};

template <class T>
Tensor Tensor::scalar(T value) {
  Tensor t(dtype_v<T>, Shape{});
  *t.data<T>() = value;
  return t;
}

template <class T>
Tensor Tensor::from_vector(const std::vector<T>& values, Shape shape) {
  TROUPE_CHECK_ARG(int64_t(values.size()) == shape.num_elements(),
                   "{} values do not fill a tensor of shape {}", values.size(), shape.to_string());
  Tensor t(dtype_v<T>, shape);
  auto p = t.data<T>();
  for (std::size_t i = 0; i < values.size(); ++i) p[i] = values[i];
  return t;
}

template <class T>
T Tensor::scalar_value() const {
  TROUPE_CHECK_ARG(num_elements() == 1, "expected a tensor of one element, got {}", describe());
  return *data<T>();
}

// Calls f(float{}) or f(double{}) for a float32 or float64 tensor; anything else is refused
// naming `what` (the op) and the tensor.
template <class F>
decltype(auto) visit_float32_or_64(const Tensor& t, const char* what, F&& f) {
  switch (t.dtype()) {
    case DType::float32: return f(float{});
    case DType::float64: return f(double{});
    default: break;
  }
  fail(ErrorCode::invalid_argument, "{} takes float32 or float64, got {}", what, t.describe());
}

}  // namespace troupe
