#include "actors/cluster/tensor_transfer.hpp"

#include <cstring>

#include "core/error.hpp"
#include "core/wire/float16.hpp"

namespace troupe {

std::size_t num_chunks(const Tensor& tensor, std::size_t chunk_bytes) {
  if (chunk_bytes == 0) fail(ErrorCode::invalid_argument, "a transfer chunk must hold at least one byte");
  return std::max<std::size_t>(1, (tensor.byte_size() + chunk_bytes - 1) / chunk_bytes);
}

TensorChunk chunk_of(const Tensor& tensor, uint64_t transfer, std::size_t index, std::size_t chunk_bytes) {
  const std::size_t total = tensor.byte_size();
  if (index >= num_chunks(tensor, chunk_bytes))
    fail(ErrorCode::internal, "chunk {} of a tensor of {} chunk(s)", index, num_chunks(tensor, chunk_bytes));
  TensorChunk c;
  c.transfer = transfer;
  c.offset = index * chunk_bytes;
  c.total = total;
  c.dtype = int32_t(tensor.dtype());
  c.dims = tensor.shape().dims();
  const std::size_t len = std::min(chunk_bytes, total - c.offset);
  const auto* data = static_cast<const uint8_t*>(tensor.raw_data());
  if (len > 0) c.bytes = ChunkBytes(std::make_shared<Tensor>(tensor), data + c.offset, len);
  return c;
}

TensorChunk landed_chunk(Tensor tensor, uint64_t transfer, uint64_t wire_bytes) {
  TensorChunk c;
  c.transfer = transfer;
  c.total = tensor.byte_size();
  c.dtype = int32_t(tensor.dtype());
  c.dims = tensor.shape().dims();
  c.bytes = ChunkBytes::landed(std::move(tensor), wire_bytes);
  return c;
}

std::vector<TensorChunk> chunks_of(const Tensor& tensor, uint64_t transfer, std::size_t chunk_bytes) {
  std::vector<TensorChunk> out;
  for (std::size_t i = 0; i < num_chunks(tensor, chunk_bytes); ++i) out.push_back(chunk_of(tensor, transfer, i, chunk_bytes));
  return out;
}

std::optional<Tensor> ChunkBytes::take_landed() {
  if (!landed_.is_initialized()) return std::nullopt;
  Tensor t = std::move(landed_);
  landed_ = Tensor();
  owner_.reset();
  data_ = nullptr;
  size_ = 0;
  return t;
}

LandingZone& LandingZone::instance() {
  static LandingZone zone;
  return zone;
}

std::optional<Tensor> LandingZone::place(const TensorChunk& c, uint64_t size) {
  if (c.encoding != TensorChunk::raw || c.offset + size > c.total || c.offset + size < c.offset) return std::nullopt;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = tensors_.find(c.transfer);
  if (it == tensors_.end()) {
    TensorChunk whole = {c.transfer, 0, c.total, c.dtype, c.dims, {}, TensorChunk::raw};
    auto t = whole_tensor_for(whole, c.total);
    if (!t) return std::nullopt;
    it = tensors_.emplace(c.transfer, std::move(*t)).first;
  } else if (it->second.byte_size() != c.total) {
    return std::nullopt;
  }
  return it->second;
}

void LandingZone::erase(uint64_t transfer) {
  Tensor gone;  // freed outside the lock
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = tensors_.find(transfer);
  if (it == tensors_.end()) return;
  gone = std::move(it->second);
  tensors_.erase(it);
}

std::size_t LandingZone::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return tensors_.size();
}

std::optional<Tensor> whole_tensor_for(const TensorChunk& c, uint64_t bytes) {
  if (c.encoding != TensorChunk::raw || c.offset != 0 || c.total != bytes) return std::nullopt;
  if (c.dtype <= 0 || c.dtype > int32_t(DType::boolean) || c.dims.size() > std::size_t(Shape::kMaxRank)) return std::nullopt;
  for (int64_t d : c.dims)
    if (d < 0) return std::nullopt;
  Tensor t(DType(c.dtype), Shape(c.dims));
  if (t.byte_size() != bytes) return std::nullopt;
  return t;
}

std::optional<Tensor> TensorAssembler::add(TensorChunk& c) {
  // All of a raw tensor in one chunk, read straight into its tensor: nothing to put together.
  if (partial_.count(c.transfer) == 0)
    if (auto landed = c.bytes.take_landed()) return landed;
  auto [it, fresh] = partial_.try_emplace(c.transfer);
  Partial& p = it->second;
  auto refuse = [&](const std::string& why) {
    partial_.erase(it);
    LandingZone::instance().erase(c.transfer);
    fail(ErrorCode::data_loss, "transfer {}: {}", c.transfer, why);
  };
  if (fresh) {
    if (c.dtype <= 0 || c.dtype > int32_t(DType::boolean)) refuse(fmt::format("unknown dtype {}", c.dtype));
    if (c.dims.size() > std::size_t(Shape::kMaxRank)) refuse(fmt::format("{} dimensions", c.dims.size()));
    for (int64_t d : c.dims)
      if (d < 0) refuse(fmt::format("a negative dimension {}", d));
    if (c.encoding != TensorChunk::raw && c.encoding != TensorChunk::float16)
      refuse(fmt::format("unknown encoding {}", int(c.encoding)));
    if (c.encoding == TensorChunk::float16 && DType(c.dtype) != DType::float32)
      refuse(fmt::format("a float16 encoding of a {} tensor (only float32 crosses so)", name_of(DType(c.dtype))));
    // The chunks' bytes may already be in their place in the transfer's tensor (LandingZone).
    p.tensor = c.bytes.in_place().is_initialized() ? c.bytes.in_place() : Tensor(DType(c.dtype), Shape(c.dims));
    p.half = c.encoding == TensorChunk::float16;
    if (p.tensor.byte_size() != (p.half ? 2 * c.total : c.total))
      refuse(fmt::format("{} bytes said for a {} tensor of {} bytes", c.total, p.tensor.describe(), p.tensor.byte_size()));
  } else if (DType(c.dtype) != p.tensor.dtype() || c.dims != p.tensor.shape().dims() ||
             c.total != (p.half ? p.tensor.byte_size() / 2 : p.tensor.byte_size()) || p.half != (c.encoding == TensorChunk::float16)) {
    refuse("chunks disagree on the tensor's dtype, shape or size");
  }
  const uint64_t end = c.offset + c.bytes.size();
  if (end > c.total || end < c.offset) refuse(fmt::format("bytes {}..{} lie outside its {} bytes", c.offset, end, c.total));
  auto next = p.ranges.lower_bound(c.offset);
  bool overlaps = next != p.ranges.end() && next->first < end;
  if (next != p.ranges.begin() && std::prev(next)->second > c.offset) overlaps = true;
  if (overlaps && !c.bytes.empty()) refuse(fmt::format("bytes {}..{} came twice", c.offset, end));
  if (p.half && (c.offset % 2 || c.bytes.size() % 2)) refuse(fmt::format("float16 bytes {}..{} split an element", c.offset, end));
  if (!c.bytes.empty() && p.half) {
    std::vector<uint16_t> half(c.bytes.size() / 2);  // aligned for the conversion
    std::memcpy(half.data(), c.bytes.data(), c.bytes.size());
    float16_to_float32(half.data(), p.tensor.data<float>() + c.offset / 2, half.size());
  } else if (!c.bytes.empty()) {
    uint8_t* to = static_cast<uint8_t*>(p.tensor.raw_data()) + c.offset;
    if (to != c.bytes.data()) std::memcpy(to, c.bytes.data(), c.bytes.size());  // unless read there already
  }
  if (!c.bytes.empty()) {
    p.ranges.emplace(c.offset, end);
    p.received += c.bytes.size();
  }
  if (p.received < c.total) return std::nullopt;
  Tensor done = std::move(p.tensor);
  partial_.erase(it);
  LandingZone::instance().erase(c.transfer);
  return done;
}

void TensorAssembler::drop(uint64_t transfer) {
  partial_.erase(transfer);
  LandingZone::instance().erase(transfer);
}

void add_transfer_types(caf::actor_system_config& config) {
  config.add_message_type<std::vector<int64_t>>("troupe.int64s");
  config.add_message_type<std::vector<uint8_t>>("troupe.bytes");  // troupe-bench transfer's raw bytes
  config.add_message_type<TensorChunk>("troupe.TensorChunk");
}

}  // namespace troupe
