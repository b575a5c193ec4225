#pragma once
// A tensor crossing processes: its bytes cut into chunks of at most kTransferChunk (4 MiB, which
// measured best over CAF's middleman: docs/performance.md, "Bytes between two processes"), each a
// message of raw bytes (CAF serializes a byte vector with one memcpy, never element by element).
// The first chunk of a transfer says the dtype, shape and total size; the receiver's
// TensorAssembler allocates the tensor once then and copies each chunk in where its offset says,
// in whatever order chunks come. A tensor of at most one chunk is one message.
// Internal to actors/: includes CAF.
#include <caf/all.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace troupe {

inline constexpr std::size_t kTransferChunk = std::size_t(4) << 20;

struct TensorChunk {
  enum Encoding : int8_t { raw = 0, float16 = 1 };
  uint64_t transfer = 0;  // chosen by the sender, unique among its transfers to one receiver
  uint64_t offset = 0;    // of these bytes in the tensor's
  uint64_t total = 0;     // the tensor's byte size
  int32_t dtype = 0;      // DType
  std::vector<int64_t> dims;
  std::vector<uint8_t> bytes;
  // raw: the tensor's bytes; float16: a float32 tensor's elements as float16 (core/wire/
  // float16.hpp), offset and total counting those bytes (half the tensor's).
  int8_t encoding = raw;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TensorChunk& x) {
  return f(caf::meta::type_name("troupe.TensorChunk"), x.transfer, x.offset, x.total, x.dtype, x.dims, x.bytes, x.encoding);
}

// How many chunks `tensor` takes (one for an empty tensor), and chunk `index` of them: made one
// at a time, so a sender holds only the chunks in flight, not a second copy of the tensor.
std::size_t num_chunks(const Tensor& tensor, std::size_t chunk_bytes = kTransferChunk);
TensorChunk chunk_of(const Tensor& tensor, uint64_t transfer, std::size_t index,
                     std::size_t chunk_bytes = kTransferChunk);
// All of them at once (small tensors, tests).
std::vector<TensorChunk> chunks_of(const Tensor& tensor, uint64_t transfer, std::size_t chunk_bytes = kTransferChunk);

// Puts received chunks together, per transfer. Not thread-safe: one actor owns it.
class TensorAssembler {
 public:
  // The whole tensor once the last byte of its transfer has come, else nullopt. Throws
  // data_loss naming the transfer when chunks disagree (dtype, shape or size), overlap a byte
  // already received, or lie outside the tensor.
  std::optional<Tensor> add(TensorChunk& chunk);
  std::size_t in_progress() const { return partial_.size(); }
  // Forgets what came of a transfer that will not be finished (its step failed).
  void drop(uint64_t transfer) { partial_.erase(transfer); }

 private:
  struct Partial {
    Tensor tensor;
    bool half = false;  // chunks carry float16
    uint64_t received = 0;
    std::map<uint64_t, uint64_t> ranges;  // offset -> end, of the bytes received so far
  };
  std::map<uint64_t, Partial> partial_;
};

// What a process's CAF configuration needs for tensors to cross: the message types, by the names
// every process uses.
void add_transfer_types(caf::actor_system_config& config);

}  // namespace troupe
