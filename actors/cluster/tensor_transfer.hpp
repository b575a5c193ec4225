#pragma once
// A tensor crossing processes: its bytes cut into chunks of at most kTransferChunk (4 MiB, the
// size that moves bytes fastest over CAF's middleman: docs/performance.md, "Bytes between two
// processes"), each a message of raw bytes. A chunk refers to its sender's tensor (no copy:
// CAF's serializer copies the bytes straight from it into the connection's buffer), and the
// receiver's deserializer puts the bytes of a tensor that fits in one chunk straight into a
// tensor allocated for it (ChunkBytes), so a tensor up to 4 MiB is copied once on each side, by
// CAF, and never element by element.
// The first chunk of a transfer says the dtype, shape and total size; the receiver's
// TensorAssembler allocates the tensor once then and copies each chunk in where its offset says,
// in whatever order chunks come. A tensor of at most one chunk is one message.
// Internal to actors/: includes CAF.
#include <caf/all.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "core/tensor.hpp"

namespace troupe {

inline constexpr std::size_t kTransferChunk = std::size_t(4) << 20;

struct TensorChunk;

// The bytes of a chunk. On the sender a view of memory kept alive by its owner (a tensor, or
// its float16 form); on the receiver what the deserializer read: a whole tensor when the chunk
// holds all of a raw one (landed), else a buffer allocated without zeroing.
class ChunkBytes {
 public:
  ChunkBytes() = default;
  // Bytes [offset, offset + size) of `owner`'s memory at `data`, kept alive by `owner`.
  ChunkBytes(std::shared_ptr<const void> owner, const uint8_t* data, uint64_t size)
      : owner_(std::move(owner)), data_(data), size_(size) {}
  // All of `tensor`, already received whole (the data path, data_path.hpp), `wire_bytes` of it
  // on the wire (fewer when it crossed as float16).
  static ChunkBytes landed(Tensor tensor, uint64_t wire_bytes) {
    ChunkBytes b;
    b.data_ = static_cast<const uint8_t*>(tensor.raw_data());
    b.size_ = wire_bytes;
    b.landed_ = std::move(tensor);
    return b;
  }
  const uint8_t* data() const { return data_; }
  uint64_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  // The tensor the deserializer put these bytes into, when the chunk was all of a raw tensor.
  std::optional<Tensor> take_landed();
  // The tensor of the whole transfer these bytes were read into, in place (LandingZone), when
  // the chunk was part of a raw tensor; else empty.
  const Tensor& in_place() const { return in_place_; }

  // CAF: written straight from the memory viewed; read into a tensor or a buffer.
  template <class Serializer>
  caf::error save(Serializer& f) const {
    std::size_t n = size_;
    if (auto err = f.begin_sequence(n)) return err;
    if (n > 0)
      if (auto err = f.apply_raw(n, const_cast<uint8_t*>(data_))) return err;
    return f.end_sequence();
  }
  template <class Deserializer>
  caf::error load(Deserializer& f, const TensorChunk& header);

 private:
  std::shared_ptr<const void> owner_;
  const uint8_t* data_ = nullptr;
  uint64_t size_ = 0;
  Tensor landed_;
  Tensor in_place_;
};

// The tensors of transfers being received in several raw chunks, by transfer id: the
// deserializer (in the network layer's thread) reads each chunk straight to its place in its
// transfer's tensor, which the first chunk to come allocates; the TensorAssembler that completes
// or drops the transfer erases it. Thread-safe (one mutex, held only around the map).
class LandingZone {
 public:
  static LandingZone& instance();
  // The tensor `size` bytes of chunk `c` go into, made if need be; nullopt when c's header
  // makes no raw tensor, or the bytes would lie outside it.
  std::optional<Tensor> place(const TensorChunk& c, uint64_t size);
  void erase(uint64_t transfer);
  std::size_t size() const;

 private:
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, Tensor> tensors_;
};

struct TensorChunk {
  enum Encoding : int8_t { raw = 0, float16 = 1 };
  uint64_t transfer = 0;  // chosen by the sender, unique among its transfers to one receiver
  uint64_t offset = 0;    // of these bytes in the tensor's
  uint64_t total = 0;     // the tensor's byte size
  int32_t dtype = 0;      // DType
  std::vector<int64_t> dims;
  ChunkBytes bytes;
  // raw: the tensor's bytes; float16: a float32 tensor's elements as float16 (core/wire/
  // float16.hpp), offset and total counting those bytes (half the tensor's).
  int8_t encoding = raw;
};

// The tensor a raw chunk that holds all of one stands for (its dtype and dims valid, its size
// theirs); nullopt otherwise.
std::optional<Tensor> whole_tensor_for(const TensorChunk& header, uint64_t bytes);

template <class Deserializer>
caf::error ChunkBytes::load(Deserializer& f, const TensorChunk& header) {
  std::size_t n = 0;
  if (auto err = f.begin_sequence(n)) return err;
  uint8_t* into = nullptr;
  if (auto whole = whole_tensor_for(header, n)) {
    landed_ = std::move(*whole);
    into = static_cast<uint8_t*>(landed_.raw_data());
  } else if (auto part = n > 0 ? LandingZone::instance().place(header, n) : std::nullopt) {
    in_place_ = std::move(*part);
    into = static_cast<uint8_t*>(in_place_.raw_data()) + header.offset;
  } else if (n > 0) {
    auto buffer = std::shared_ptr<uint8_t[]>(new uint8_t[n]);  // not zeroed: every byte is read next
    into = buffer.get();
    owner_ = std::move(buffer);
  }
  data_ = into;
  size_ = n;
  if (n > 0)
    if (auto err = f.apply_raw(n, into)) return err;
  return f.end_sequence();
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TensorChunk& x) {
  if constexpr (std::is_base_of_v<caf::serializer, Inspector>) {
    if (auto err = f(caf::meta::type_name("troupe.TensorChunk"), x.transfer, x.offset, x.total, x.dtype, x.dims, x.encoding))
      return err;
    return x.bytes.save(f);
  } else if constexpr (std::is_base_of_v<caf::deserializer, Inspector>) {
    if (auto err = f(caf::meta::type_name("troupe.TensorChunk"), x.transfer, x.offset, x.total, x.dtype, x.dims, x.encoding))
      return err;
    return x.bytes.load(f, x);
  } else {  // a rendering for logs
    uint64_t bytes = x.bytes.size();
    return f(caf::meta::type_name("troupe.TensorChunk"), x.transfer, x.offset, x.total, x.dtype, x.dims, x.encoding, bytes);
  }
}

// How many chunks `tensor` takes (one for an empty tensor), and chunk `index` of them: made one
// at a time, so a sender holds only the chunks in flight, not a second copy of the tensor.
std::size_t num_chunks(const Tensor& tensor, std::size_t chunk_bytes = kTransferChunk);
TensorChunk chunk_of(const Tensor& tensor, uint64_t transfer, std::size_t index,
                     std::size_t chunk_bytes = kTransferChunk);
// A chunk holding all of `tensor`, which came whole over a data connection (data_path.hpp):
// `wire_bytes` of it crossed (fewer when it crossed as float16).
TensorChunk landed_chunk(Tensor tensor, uint64_t transfer, uint64_t wire_bytes);
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
  void drop(uint64_t transfer);

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
