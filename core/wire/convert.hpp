#pragma once
// Conversions between core types and their Cap'n Proto form (core/wire/*.capnp); a tensor's
// bytes form is declared in core/wire/tensor_bytes.hpp. Readers refuse unknown versions and
// inconsistent sizes. Internal: not installed, as it needs Cap'n Proto's headers.
#include <string>
#include <vector>

#include <capnp/message.h>
#include <capnp/serialize.h>
#include <kj/exception.h>

#include "core/tensor.hpp"
#include "core/wire/tensor.capnp.h"
#include "core/wire/tensor_bytes.hpp"

namespace troupe::wire_format {

constexpr uint32_t kGraphVersion = 1;
// One Data holds at most 2^29 - 1 bytes; tensors are split into chunks of this size.
constexpr std::size_t kChunkBytes = std::size_t(256) << 20;
// Readers raise Cap'n Proto's traversal limit (64 MiB by default) to this many words.
constexpr uint64_t kTraversalLimitWords = uint64_t(1) << 40;

wire::DType to_wire(DType dtype);
DType from_wire(wire::DType dtype);

void to_wire(const Tensor& tensor, wire::Tensor::Builder out);
Tensor from_wire(wire::Tensor::Reader in, const std::string& where);

// The flat bytes of a Cap'n Proto message.
std::vector<unsigned char> message_to_bytes(capnp::MessageBuilder& message);

// Reads the Cap'n Proto message in `data` with root type Root and returns f(root reader).
// Anything malformed (a size that is not whole words, a bad pointer, a failure inside f other
// than a troupe::Error) is refused as data_loss: "<where>: not a valid <what>: ...". Reading
// stops at `traversal_limit_words` words read (each read counts, so repeated reads too).
template <class Root, class F>
auto read_message(const unsigned char* data, std::size_t size, const std::string& where,
                  const char* what, F&& f, uint64_t traversal_limit_words = kTraversalLimitWords)
    -> decltype(f(std::declval<typename Root::Reader>())) {
  if (size % sizeof(capnp::word) != 0)
    fail(ErrorCode::data_loss, "{}: {} bytes is not a whole number of Cap'n Proto words", where,
         size);
  // Copy into word-aligned storage: the caller's bytes may be unaligned.
  auto words = kj::heapArray<capnp::word>(size / sizeof(capnp::word));
  if (size) std::memcpy(words.begin(), data, size);  // an empty message may come with no bytes at all
  try {
    capnp::ReaderOptions options;
    options.traversalLimitInWords = traversal_limit_words;
    capnp::FlatArrayMessageReader reader(words, options);
    if (reader.getEnd() != words.end())
      fail(ErrorCode::data_loss, "{}: not a valid {}: {} bytes follow the message", where, what,
           (words.end() - reader.getEnd()) * sizeof(capnp::word));
    return f(reader.getRoot<Root>());
  } catch (const kj::Exception& e) {
    fail(ErrorCode::data_loss, "{}: not a valid {}: {}", where, what, e.getDescription().cStr());
  } catch (const Error&) {
    throw;
  } catch (const std::exception& e) {
    fail(ErrorCode::data_loss, "{}: not a valid {}: {}", where, what, e.what());
  }
}

}  // namespace troupe::wire_format
