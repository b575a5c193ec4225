#pragma once
// Conversions between core types and their Cap'n Proto form (core/wire/*.capnp), and a
// tensor's file/bytes form. Readers refuse unknown versions and inconsistent sizes.
#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "core/wire/tensor.capnp.h"

namespace troupe::wire_format {

constexpr uint32_t kTensorVersion = 1;
constexpr uint32_t kGraphVersion = 1;
// One Data holds at most 2^29 - 1 bytes; tensors are split into chunks of this size.
constexpr std::size_t kChunkBytes = std::size_t(256) << 20;
// Readers raise Cap'n Proto's traversal limit (64 MiB by default) to this many words.
constexpr uint64_t kTraversalLimitWords = uint64_t(1) << 40;

wire::DType to_wire(DType dtype);
DType from_wire(wire::DType dtype);

void to_wire(const Tensor& tensor, wire::Tensor::Builder out);
Tensor from_wire(wire::Tensor::Reader in, const std::string& where);

std::vector<unsigned char> tensor_to_bytes(const Tensor& tensor);
Tensor tensor_from_bytes(const unsigned char* data, std::size_t size, const std::string& where);

}  // namespace troupe::wire_format
