#include "ops/nn/dnnl.hpp"

#include "core/allocator.hpp"
#include "core/error.hpp"
#include "devices/cpu_threads.hpp"

#include <cstdlib>
#include <memory>
#include <utility>

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

const dnnl::primitive_attr& attrs() {
  static const dnnl::primitive_attr* a = [] {
    auto* attr = new dnnl::primitive_attr;
    attr->set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return attr;
  }();
  return *a;
}

dnnl::memory::desc blocked_nchw_desc(const Shape& nchw) {
  static const bool wide = dnnl::get_effective_cpu_isa() >= dnnl::cpu_isa::avx512_core;
  return dnnl::memory::desc(dims(nchw), dnnl::memory::data_type::f32,
                            wide ? dnnl::memory::format_tag::nChw16c : dnnl::memory::format_tag::nChw8c);
}

dnnl::memory scratchpad(const dnnl::memory::desc& desc) {
  thread_local std::unique_ptr<void, decltype(&std::free)> buffer{nullptr, &std::free};
  thread_local std::size_t capacity = 0;
  std::size_t need = (desc.get_size() + 63) / 64 * 64;
  if (need > capacity) {
    buffer.reset(std::aligned_alloc(64, need));
    if (!buffer) fail(ErrorCode::resource_exhausted, "oneDNN scratchpad: cannot allocate {} bytes", need);
    capacity = need;
  }
  return dnnl::memory(desc, engine(), buffer.get());
}

Layout::Layout(const dnnl::memory::desc& plain, const dnnl::memory::desc& chosen)
    : plain_(plain), chosen_(chosen), same_(plain == chosen) {
  if (same_) return;
  to_chosen_ = Reorder(plain, chosen);
  to_plain_ = Reorder(chosen, plain);
}

Layout::Layout(Layout&& other) noexcept { *this = std::move(other); }

Layout& Layout::operator=(Layout&& other) noexcept {
  if (this == &other) return *this;
  release();
  plain_ = other.plain_;
  chosen_ = other.chosen_;
  same_ = other.same_;
  to_chosen_ = std::move(other.to_chosen_);
  to_plain_ = std::move(other.to_plain_);
  block_ = std::exchange(other.block_, nullptr);
  block_bytes_ = std::exchange(other.block_bytes_, 0);
  return *this;
}

dnnl::memory Layout::buffer() {
  if (!block_) {
    block_bytes_ = chosen_.get_size();
    block_ = host_allocator().allocate(block_bytes_);
  }
  return dnnl::memory(chosen_, engine(), block_);
}

void Layout::release() {
  if (!block_) return;
  host_allocator().deallocate(block_, block_bytes_);
  block_ = nullptr;
}

Layout::Reorder::Reorder(const dnnl::memory::desc& from, const dnnl::memory::desc& to) {
  dnnl::reorder::primitive_desc pd(engine(), from, engine(), to, attrs());
  primitive = dnnl::reorder(pd);
  pad = pd.scratchpad_desc();
}

void Layout::Reorder::run(const dnnl::memory& from, const dnnl::memory& to) {
  primitive.execute(stream(), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}, {DNNL_ARG_SCRATCHPAD, scratchpad(pad)}});
}

dnnl::memory Layout::in(const Tensor& tensor) {
  if (same_) return wrap(tensor, chosen_);
  dnnl::memory b = buffer();
  to_chosen_.run(wrap(tensor, plain_), b);
  return b;
}

dnnl::memory Layout::out(Tensor& tensor) { return same_ ? wrap(tensor, chosen_) : buffer(); }

void Layout::finish(Tensor& tensor) {
  if (!same_) to_plain_.run(buffer(), wrap(tensor, plain_));
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
