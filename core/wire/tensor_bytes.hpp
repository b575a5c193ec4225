#pragma once
// A tensor's bytes form (a Cap'n Proto message, core/wire/tensor.capnp), for files and for the
// wire. This header is free of Cap'n Proto, so programs built against an installed Troupe can
// use it; core/wire/convert.hpp has the Cap'n Proto builders and readers themselves.
#include <cstddef>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace troupe::wire_format {

constexpr uint32_t kTensorVersion = 1;

std::vector<unsigned char> tensor_to_bytes(const Tensor& tensor);
// Refuses a corrupt message or an unknown version with ErrorCode::data_loss, naming `where`.
Tensor tensor_from_bytes(const unsigned char* data, std::size_t size, const std::string& where);

}  // namespace troupe::wire_format
