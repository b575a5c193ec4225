#include "ops/nn/dnnl.hpp"

#include "core/error.hpp"
#include "devices/cpu_threads.hpp"

namespace troupe::dnnl_cpu {

dnnl::engine& engine() {
  static dnnl::engine* e = new dnnl::engine(dnnl::engine::kind::cpu, 0);
  return *e;
}

dnnl::stream& stream() {
  apply_intra_op_threads_here();
  thread_local dnnl::stream s(engine());
  return s;
}

dnnl::memory::data_type data_type(DType dtype) {
  switch (dtype) {
    case DType::float32: return dnnl::memory::data_type::f32;
    case DType::float16: return dnnl::memory::data_type::f16;
    case DType::int32: return dnnl::memory::data_type::s32;
    case DType::uint8: return dnnl::memory::data_type::u8;
    default: break;
  }
  fail(ErrorCode::invalid_argument, "oneDNN kernels do not take dtype {}", name_of(dtype));
}

dnnl::memory::dims dims(const Shape& shape) {
  return dnnl::memory::dims(shape.begin(), shape.end());
}

dnnl::memory::desc plain_desc(const Shape& shape, DType dtype) {
  dnnl::memory::dims strides(std::size_t(shape.rank()));
  int64_t s = 1;
  for (int d = shape.rank() - 1; d >= 0; --d) {
    strides[std::size_t(d)] = s;
    s *= shape[d];
  }
  return dnnl::memory::desc(dims(shape), data_type(dtype), strides);
}

dnnl::memory wrap(const Tensor& tensor) { return wrap(tensor, plain_desc(tensor.shape(), tensor.dtype())); }

dnnl::memory wrap(const Tensor& tensor, const dnnl::memory::desc& desc) {
  return dnnl::memory(desc, engine(), tensor.raw_data());
}

bool ShapeKey::matches(std::initializer_list<const Tensor*> inputs) const {
  if (inputs.size() != shapes.size()) return false;
  std::size_t i = 0;
  for (const Tensor* t : inputs) {
    if (t->shape() != shapes[i++] || t->dtype() != dtype) return false;
  }
  return true;
}

void ShapeKey::set(std::initializer_list<const Tensor*> inputs) {
  shapes.clear();
  for (const Tensor* t : inputs) shapes.push_back(t->shape());
  dtype = inputs.size() ? (*inputs.begin())->dtype() : DType::invalid;
}

}  // namespace troupe::dnnl_cpu
