#include "core/tensor.hpp"

#include <new>

#include <sanitizer/asan_interface.h>  // its POISON macros do nothing outside AddressSanitizer builds

namespace troupe {

namespace {

// Freed Buffer objects (the 64 bytes that count a tensor's references, not its data), up to 64,
// kept by the thread that freed them for its next tensors: every kernel's output takes one and
// the last release of every value gives one back, once or more per node of a graph, and glibc's
// malloc and free cost that path tens of nanoseconds (its per-thread cache holds 7 chunks of a
// size; the releases of a burst beyond that go to a heap, under its lock). Under
// AddressSanitizer a kept object is poisoned until it is taken again, so that a use after its
// tensor's release is still reported.
struct FreedBuffers {
  static constexpr int kKept = 64;
  int count = 0;
  bool gone = false;  // the thread is ending: what it frees now goes back to the heap
  void* kept[kKept] = {};
  ~FreedBuffers() {
    gone = true;
    while (count > 0) {
      void* room = kept[--count];
      ASAN_UNPOISON_MEMORY_REGION(room, sizeof(Buffer));
      ::operator delete(room, sizeof(Buffer));
    }
  }
};
thread_local FreedBuffers tls_freed_buffers [[gnu::tls_model("initial-exec")]];

}  // namespace

Buffer* Buffer::create(Allocator& allocator, std::size_t bytes) {
  FreedBuffers& freed = tls_freed_buffers;
  void* room;
  if (freed.count > 0) {
    room = freed.kept[--freed.count];
    ASAN_UNPOISON_MEMORY_REGION(room, sizeof(Buffer));
  } else {
    room = ::operator new(sizeof(Buffer));
  }
  auto* b = new (room) Buffer();
  b->bytes_ = bytes;
  b->allocator_ = &allocator;
  if (bytes <= kInlineBytes && allocator.host_accessible() && &allocator == &host_allocator()) {
    b->data_ = b->inline_;
  } else {
    try {
      b->data_ = allocator.allocate(bytes);
    } catch (...) {
      b->data_ = b->inline_;
      b->destroy();
      throw;
    }
  }
  return b;
}

void Buffer::destroy() {
  if (data_ != inline_) allocator_->deallocate(data_, bytes_);
  this->~Buffer();
  FreedBuffers& freed = tls_freed_buffers;
  if (!freed.gone && freed.count < FreedBuffers::kKept) {
    freed.kept[freed.count++] = this;
    ASAN_POISON_MEMORY_REGION(static_cast<void*>(this), sizeof(Buffer));
  } else {
    ::operator delete(static_cast<void*>(this), sizeof(Buffer));
  }
}

Tensor::Tensor(DType dtype, Shape shape, Allocator& allocator)
    : shape_(shape), dtype_(dtype) {
  TROUPE_CHECK_ARG(dtype != DType::invalid, "cannot allocate a tensor of invalid dtype");
  buffer_ = Buffer::create(allocator, byte_size());
}

Tensor& Tensor::operator=(const Tensor& o) {
  if (this != &o) {
    if (o.buffer_) o.buffer_->add_ref();
    if (buffer_) buffer_->release();
    buffer_ = o.buffer_;
    offset_ = o.offset_;
    shape_ = o.shape_;
    dtype_ = o.dtype_;
  }
  return *this;
}

Tensor Tensor::zeros(DType dtype, Shape shape) {
  Tensor t(dtype, shape);
  std::memset(t.raw_data(), 0, t.byte_size());
  return t;
}

const std::string& Tensor::device_name() const {
  static const std::string none;
  return buffer_ ? buffer_->allocator().device_name() : none;
}

bool Tensor::host_accessible() const {
  return !buffer_ || buffer_->allocator().host_accessible();
}

void Tensor::no_data() { fail(ErrorCode::failed_precondition, "access to the data of an empty tensor"); }

void Tensor::dtype_mismatch(DType expected) const {
  fail(ErrorCode::invalid_argument, "tensor has dtype {}, accessed as {}", name_of(dtype_),
       name_of(expected));
}

Tensor Tensor::slice(int64_t begin, int64_t end) const {
  TROUPE_CHECK_ARG(shape_.rank() >= 1, "cannot slice a scalar tensor {}", describe());
  TROUPE_CHECK_ARG(0 <= begin && begin <= end && end <= shape_[0],
                   "slice [{}, {}) out of range for first dimension of {}", begin, end, describe());
  Tensor t(*this);
  std::size_t row_bytes = size_of(dtype_) * std::size_t(shape_.num_elements() / std::max<int64_t>(shape_[0], 1));
  if (shape_[0] == 0) row_bytes = 0;
  t.offset_ += std::size_t(begin) * row_bytes;
  t.shape_.set_dim(0, end - begin);
  return t;
}

Tensor Tensor::reshaped(Shape shape) const {
  TROUPE_CHECK_ARG(shape.num_elements() == num_elements(),
                   "cannot reshape {} ({} elements) to {} ({} elements)", describe(),
                   num_elements(), shape.to_string(), shape.num_elements());
  Tensor t(*this);
  t.shape_ = shape;
  return t;
}

Tensor Tensor::copy() const {
  if (!buffer_) return {};
  Tensor t(dtype_, shape_, buffer_->allocator());
  TROUPE_CHECK_ARG(host_accessible(), "Tensor::copy of device memory on {} needs the device",
                   device_name());
  std::memcpy(t.raw_data(), raw_data(), byte_size());
  return t;
}

std::string Tensor::describe() const {
  return std::string(name_of(dtype_)) + shape_.to_string();
}

std::string Tensor::to_string(int64_t max_elements) const {
  std::string s = describe();
  if (!buffer_ || !host_accessible()) return s;
  s += " {";
  int64_t n = num_elements();
  visit_dtype(dtype_, [&](auto zero) {
    using T = decltype(zero);
    auto p = static_cast<const T*>(raw_data());
    for (int64_t i = 0; i < n && i < max_elements; ++i) {
      if (i) s += ", ";
      if constexpr (std::is_same_v<T, half>)
        s += fmt::format("{}", float(p[i]));
      else if constexpr (std::is_same_v<T, uint8_t>)
        s += fmt::format("{}", int(p[i]));
      else
        s += fmt::format("{}", p[i]);
    }
  });
  if (n > max_elements) s += ", ...";
  return s + "}";
}

}  // namespace troupe
