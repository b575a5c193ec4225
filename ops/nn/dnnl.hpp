#pragma once
// oneDNN 2.x on the CPU device: one engine per process, a stream per calling thread, and
// memory objects that wrap Troupe tensors without copying. Kernels keep their primitives and
// re-create them only when the input shapes change (see ShapeKey).
#include <dnnl.hpp>

#include <vector>

#include "core/tensor.hpp"

namespace troupe::dnnl_cpu {

dnnl::engine& engine();
dnnl::stream& stream();  // this thread's stream on engine()

dnnl::memory::data_type data_type(DType dtype);  // throws for dtypes oneDNN lacks
dnnl::memory::dims dims(const Shape& shape);

// A plain (row-major) memory descriptor for a tensor's shape: nchw, oihw, nc, x, ...
dnnl::memory::desc plain_desc(const Shape& shape, DType dtype);
// The channel-blocked layout of an NCHW float32 shape that oneDNN's JIT kernels run on for this
// CPU (nChw16c with AVX-512, nChw8c otherwise). Its plain nchw kernels are several times slower.
dnnl::memory::desc blocked_nchw_desc(const Shape& nchw);
// A memory object over the tensor's bytes (no copy). The tensor must outlive the memory.
dnnl::memory wrap(const Tensor& tensor);
dnnl::memory wrap(const Tensor& tensor, const dnnl::memory::desc& desc);

// Primitive attributes every kernel passes to its primitive descriptors: a user-managed
// scratchpad. oneDNN's default (library) scratchpad is a per-thread buffer sized when the
// primitive is created, and an actor's kernel may be created on one scheduler thread and run on
// another, where that buffer can be smaller (heap corruption). With these attributes each
// execution passes scratchpad(pd) instead.
const dnnl::primitive_attr& attrs();
// This thread's scratchpad, grown to fit `desc`; valid until the next call on this thread.
// Kernels run their primitive to completion (stream().wait()) before returning, so reuse is safe.
dnnl::memory scratchpad(const dnnl::memory::desc& desc);

// A tensor's plain layout bridged to the layout a primitive chose (format_tag::any lets
// oneDNN pick its blocked layouts, nChw16c and the like, where its fastest kernels run). When
// the two agree the tensor's bytes are used directly; otherwise a reorder goes through a
// buffer borrowed from the host allocator (its cache makes that cheap) for one kernel call and
// given back by release(), so buffers count in the device's memory and exist only while used.
// Kernels hold a Borrowed guard over their layouts.
class Layout {
 public:
  Layout() = default;
  Layout(const dnnl::memory::desc& plain, const dnnl::memory::desc& chosen);
  Layout(const Layout&) = delete;
  Layout& operator=(const Layout&) = delete;
  Layout(Layout&& other) noexcept;
  Layout& operator=(Layout&& other) noexcept;
  ~Layout() { release(); }
  // An input: the tensor's bytes in the chosen layout (reordered into the buffer if needed).
  dnnl::memory in(const Tensor& tensor);
  // An output: where the primitive writes; call finish() afterwards to fill the tensor.
  dnnl::memory out(Tensor& tensor);
  void finish(Tensor& tensor);
  void release();  // gives the buffer back

 private:
  dnnl::memory buffer();
  dnnl::memory::desc plain_, chosen_;
  bool same_ = true;
  void* block_ = nullptr;
  std::size_t block_bytes_ = 0;
  struct Reorder {
    Reorder() = default;
    Reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to);
    void run(const dnnl::memory& from, const dnnl::memory& to);
    dnnl::reorder primitive;
    dnnl::memory::desc pad;
  };
  Reorder to_chosen_, to_plain_;
};

// Releases the layouts' buffers when the kernel call ends, however it ends.
class Borrowed {
 public:
  Borrowed(std::initializer_list<Layout*> layouts) : layouts_(layouts) {}
  ~Borrowed() {
    for (Layout* l : layouts_) l->release();
  }
  Borrowed(const Borrowed&) = delete;
  Borrowed& operator=(const Borrowed&) = delete;

 private:
  std::vector<Layout*> layouts_;
};

// The input shapes a primitive was made for; kernels rebuild when this changes.
struct ShapeKey {
  std::vector<Shape> shapes;
  DType dtype = DType::invalid;
  bool matches(std::initializer_list<const Tensor*> inputs) const;
  void set(std::initializer_list<const Tensor*> inputs);
};

}  // namespace troupe::dnnl_cpu
