#include "core/wire/convert.hpp"


namespace troupe::wire_format {

wire::DType to_wire(DType d) {
  switch (d) {
    case DType::float32: return wire::DType::FLOAT32;
    case DType::float16: return wire::DType::FLOAT16;
    case DType::float64: return wire::DType::FLOAT64;
    case DType::int32: return wire::DType::INT32;
    case DType::int64: return wire::DType::INT64;
    case DType::uint8: return wire::DType::UINT8;
    case DType::boolean: return wire::DType::BOOL;
    case DType::invalid: break;
  }
  return wire::DType::INVALID;
}

DType from_wire(wire::DType d) {
  switch (d) {
    case wire::DType::FLOAT32: return DType::float32;
    case wire::DType::FLOAT16: return DType::float16;
    case wire::DType::FLOAT64: return DType::float64;
    case wire::DType::INT32: return DType::int32;
    case wire::DType::INT64: return DType::int64;
    case wire::DType::UINT8: return DType::uint8;
    case wire::DType::BOOL: return DType::boolean;
    default: break;
  }
  return DType::invalid;
}

void to_wire(const Tensor& t, wire::Tensor::Builder out) {
  TROUPE_CHECK_ARG(t.host_accessible(), "serialising a tensor on {} needs a host copy first",
                   t.device_name());
  out.setVersion(kTensorVersion);
  out.setDtype(to_wire(t.dtype()));
  auto shape = out.initShape(t.shape().rank());
  for (int i = 0; i < t.shape().rank(); ++i) shape.set(i, t.shape()[i]);
  std::size_t bytes = t.is_initialized() ? t.byte_size() : 0;
  std::size_t n_chunks = (bytes + kChunkBytes - 1) / kChunkBytes;
  auto chunks = out.initChunks(n_chunks);
  auto* src = bytes ? static_cast<const unsigned char*>(t.raw_data()) : nullptr;
  for (std::size_t c = 0; c < n_chunks; ++c) {
    std::size_t len = std::min(kChunkBytes, bytes - c * kChunkBytes);
    auto data = chunks.init(c, len);
    std::memcpy(data.begin(), src + c * kChunkBytes, len);
  }
}

namespace {

std::string shape_text(capnp::List<int64_t>::Reader dims) {
  std::string s = "[";
  for (unsigned i = 0; i < dims.size(); ++i) s += (i ? "," : "") + std::to_string(dims[i]);
  return s + "]";
}

}  // namespace

Tensor from_wire(wire::Tensor::Reader in, const std::string& where) {
  if (in.getVersion() != kTensorVersion)
    fail(ErrorCode::data_loss, "{}: tensor format version {} is not supported (this build reads {})",
         where, in.getVersion(), kTensorVersion);
  DType dtype = from_wire(in.getDtype());
  if (dtype == DType::invalid) fail(ErrorCode::data_loss, "{}: tensor has an invalid dtype", where);
  std::vector<int64_t> dims;
  std::size_t expected = size_of(dtype);
  for (auto d : in.getShape()) {
    if (d < 0) fail(ErrorCode::data_loss, "{}: tensor has a negative dimension {}", where, d);
    if (__builtin_mul_overflow(expected, std::size_t(d), &expected))
      fail(ErrorCode::data_loss, "{}: tensor shape {} overflows", where,
           shape_text(in.getShape()));
    dims.push_back(d);
  }
  if (int(dims.size()) > Shape::kMaxRank)
    fail(ErrorCode::data_loss, "{}: tensor has rank {}, more than {}", where, dims.size(), Shape::kMaxRank);
  // Check the size before allocating: a forged shape must not make us ask for terabytes.
  std::size_t got = 0;
  for (auto chunk : in.getChunks()) got += chunk.size();
  if (got != expected)
    fail(ErrorCode::data_loss, "{}: tensor {}{} needs {} bytes but the data holds {}", where,
         name_of(dtype), Shape(dims).to_string(), expected, got);
  Tensor t(dtype, Shape(dims));
  auto* dst = static_cast<unsigned char*>(expected ? t.raw_data() : nullptr);
  for (auto chunk : in.getChunks()) {
    std::memcpy(dst, chunk.begin(), chunk.size());
    dst += chunk.size();
  }
  return t;
}

std::vector<unsigned char> message_to_bytes(capnp::MessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return {bytes.begin(), bytes.end()};
}

std::vector<unsigned char> tensor_to_bytes(const Tensor& tensor) {
  capnp::MallocMessageBuilder message;
  to_wire(tensor, message.initRoot<wire::Tensor>());
  return message_to_bytes(message);
}

Tensor tensor_from_bytes(const unsigned char* data, std::size_t size, const std::string& where) {
  return read_message<wire::Tensor>(data, size, where, "tensor message",
                                    [&](wire::Tensor::Reader r) { return from_wire(r, where); });
}

}  // namespace troupe::wire_format
