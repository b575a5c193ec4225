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
// A memory object over the tensor's bytes (no copy). The tensor must outlive the memory.
dnnl::memory wrap(const Tensor& tensor);
dnnl::memory wrap(const Tensor& tensor, const dnnl::memory::desc& desc);

// The input shapes a primitive was made for; kernels rebuild when this changes.
struct ShapeKey {
  std::vector<Shape> shapes;
  DType dtype = DType::invalid;
  bool matches(std::initializer_list<const Tensor*> inputs) const;
  void set(std::initializer_list<const Tensor*> inputs);
};

}  // namespace troupe::dnnl_cpu
