// The index of a checkpoint: its bytes (a 16-byte header and a Cap'n Proto message) and the
// checks every index passes, whether read from disk or about to be written.
#include <algorithm>
#include <cstring>

#include "core/checkpoint_internal.hpp"
#include "core/crc32c.hpp"
#include "core/wire/checkpoint.capnp.h"
#include "core/wire/convert.hpp"

namespace troupe::checkpoint {

namespace {

constexpr char kMagic[8] = {'T', 'R', 'C', 'K', 'P', 'I', 'D', 'X'};
constexpr std::size_t kHeaderBytes = 16;

void put_u32(unsigned char* p, uint32_t v) {
  for (int i = 0; i < 4; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}

uint32_t get_u32(const unsigned char* p) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= uint32_t(p[i]) << (8 * i);
  return v;
}

std::string describe(const IndexEntry& e) {
  return fmt::format("{}{}", name_of(e.dtype), e.full_shape.to_string());
}

Index from_wire(wire::CheckpointIndex::Reader in, const std::string& where) {
  if (in.getVersion() != kFormatVersion)
    fail(ErrorCode::data_loss,
         "{}: checkpoint index format version {} is not supported (this build reads {})", where,
         in.getVersion(), kFormatVersion);
  Index index;
  index.version = in.getVersion();
  index.global_step = in.getGlobalStep();
  index.created_unix_ms = in.getCreatedUnixMs();
  if (index.global_step < 0)
    fail(ErrorCode::data_loss, "{}: negative global step {}", where, index.global_step);
  auto entries = in.getEntries();
  index.entries.reserve(entries.size());
  for (auto e : entries) {
    IndexEntry out;
    out.name = e.getName().cStr();
    out.dtype = wire_format::from_wire(e.getDtype());
    auto dims = e.getFullShape();
    if (dims.size() > unsigned(Shape::kMaxRank))
      fail(ErrorCode::data_loss, "{}: variable '{}' has rank {}, more than {}", where, out.name,
           dims.size(), Shape::kMaxRank);
    for (auto d : dims) {
      if (d < 0)
        fail(ErrorCode::data_loss, "{}: variable '{}' has a negative dimension {}", where,
             out.name, d);
      out.full_shape.push_back(d);
    }
    out.row_begin = e.getRowBegin();
    out.rows = e.getRows();
    out.file = e.getFile().cStr();
    out.offset = e.getOffset();
    out.length = e.getLength();
    out.crc32c = e.getCrc32c();
    index.entries.push_back(std::move(out));
  }
  detail::check_entries(index.entries, where, ErrorCode::data_loss);
  return index;
}

}  // namespace

namespace detail {

bool is_plain_file_name(const std::string& name) {
  return !name.empty() && name != "." && name != ".." &&
         name.find('/') == std::string::npos && name.find('\0') == std::string::npos;
}

uint64_t row_bytes(DType dtype, const Shape& full_shape) {
  uint64_t bytes = size_of(dtype);
  for (int i = 1; i < full_shape.rank(); ++i) bytes *= uint64_t(full_shape[i]);
  return bytes;
}

void check_entry(const IndexEntry& e, const std::string& where, ErrorCode code) {
  if (e.name.empty()) fail(code, "{}: a variable has an empty name", where);
  if (e.dtype == DType::invalid)
    fail(code, "{}: variable '{}' has an invalid dtype", where, e.name);
  // The row size and the whole variable stay under 2^63 bytes, so the products and sums
  // below are exact.
  uint64_t row = size_of(e.dtype), whole = 0;
  bool too_big = false;
  for (int i = 1; i < e.full_shape.rank(); ++i)
    too_big |= __builtin_mul_overflow(row, uint64_t(e.full_shape[i]), &row) || row > uint64_t(INT64_MAX);
  too_big |= e.full_shape.rank() > 0 &&
             (__builtin_mul_overflow(row, uint64_t(e.full_shape[0]), &whole) || whole > uint64_t(INT64_MAX));
  if (too_big)
    fail(code, "{}: variable '{}' of shape {} has more than 2^63 bytes", where, e.name,
         e.full_shape.to_string());
  int64_t total_rows = e.full_shape.rank() == 0 ? 1 : e.full_shape[0];
  if (e.row_begin < 0 || e.rows < 0 || e.row_begin > total_rows || e.rows > total_rows - e.row_begin)
    fail(code, "{}: variable '{}' ({}): {} rows from row {} are outside its {} rows", where,
         e.name, describe(e), e.rows, e.row_begin, total_rows);
  uint64_t expected = uint64_t(e.rows) * row;
  if (e.length != expected)
    fail(code, "{}: variable '{}' ({}): {} rows need {} bytes, the index says {}", where, e.name,
         describe(e), e.rows, expected, e.length);
  if (e.offset > UINT64_MAX - e.length)
    fail(code, "{}: variable '{}': offset {} + length {} overflows", where, e.name, e.offset,
         e.length);
  if (!is_plain_file_name(e.file) || e.file == kIndexFileName)
    fail(code, "{}: variable '{}' names '{}' as its data file, which is not a data file name",
         where, e.name, e.file);
}

void check_entries(std::vector<IndexEntry>& entries, const std::string& where, ErrorCode code) {
  for (const auto& e : entries) check_entry(e, where, code);
  std::sort(entries.begin(), entries.end(), [](const IndexEntry& a, const IndexEntry& b) {
    return a.name != b.name ? a.name < b.name : a.row_begin < b.row_begin;
  });
  for (std::size_t i = 0; i < entries.size();) {
    const IndexEntry& first = entries[i];
    int64_t total_rows = first.full_shape.rank() == 0 ? 1 : first.full_shape[0];
    int64_t next_row = 0;
    std::size_t j = i;
    for (; j < entries.size() && entries[j].name == first.name; ++j) {
      const IndexEntry& e = entries[j];
      if (e.dtype != first.dtype || e.full_shape != first.full_shape)
        fail(code, "{}: variable '{}' is saved both as {} and as {}", where, e.name,
             describe(first), describe(e));
      if (e.row_begin < next_row)
        fail(code, "{}: variable '{}': rows [{}, {}) are saved twice", where, e.name, e.row_begin,
             std::min(next_row, e.row_begin + e.rows));
      if (e.row_begin > next_row)
        fail(code, "{}: variable '{}' ({}): rows [{}, {}) are in no saved slice", where, e.name,
             describe(e), next_row, e.row_begin);
      next_row = e.row_begin + e.rows;
    }
    if (next_row != total_rows)
      fail(code, "{}: variable '{}' ({}): rows [{}, {}) are in no saved slice", where, first.name,
           describe(first), next_row, total_rows);
    i = j;
  }
}

}  // namespace detail

std::vector<unsigned char> index_to_bytes(const Index& index) {
  capnp::MallocMessageBuilder message;
  auto out = message.initRoot<wire::CheckpointIndex>();
  out.setVersion(index.version);
  out.setGlobalStep(index.global_step);
  out.setCreatedUnixMs(index.created_unix_ms);
  auto entries = out.initEntries(unsigned(index.entries.size()));
  for (std::size_t i = 0; i < index.entries.size(); ++i) {
    const IndexEntry& e = index.entries[i];
    auto w = entries[unsigned(i)];
    w.setName(e.name);
    w.setDtype(wire_format::to_wire(e.dtype));
    auto dims = w.initFullShape(unsigned(e.full_shape.rank()));
    for (int d = 0; d < e.full_shape.rank(); ++d) dims.set(unsigned(d), e.full_shape[d]);
    w.setRowBegin(e.row_begin);
    w.setRows(e.rows);
    w.setFile(e.file);
    w.setOffset(e.offset);
    w.setLength(e.length);
    w.setCrc32c(e.crc32c);
  }
  auto body = wire_format::message_to_bytes(message);
  std::vector<unsigned char> bytes(kHeaderBytes + body.size());
  std::memcpy(bytes.data(), kMagic, sizeof kMagic);
  put_u32(bytes.data() + 8, crc32c(body.data(), body.size()));
  std::memcpy(bytes.data() + kHeaderBytes, body.data(), body.size());
  return bytes;
}

Index parse_index(const unsigned char* data, std::size_t size, const std::string& where) {
  if (size < kHeaderBytes || std::memcmp(data, kMagic, sizeof kMagic) != 0)
    fail(ErrorCode::data_loss, "{}: not a checkpoint index (no 'TRCKPIDX' header in its {} bytes)",
         where, size);
  const unsigned char* body = data + kHeaderBytes;
  std::size_t body_size = size - kHeaderBytes;
  uint32_t stored = get_u32(data + 8), computed = crc32c(body, body_size);
  if (stored != computed)
    fail(ErrorCode::data_loss,
         "{}: the checkpoint index is corrupt: crc32c {:#010x} of its {} bytes, the header says "
         "{:#010x}",
         where, computed, body_size, stored);
  if (get_u32(data + 12) != 0)
    fail(ErrorCode::data_loss, "{}: the checkpoint index header's reserved bytes are not zero",
         where);
  // Every reader call is charged against this limit, so a forged message (a list of a billion
  // empty structs, pointers that loop) costs at most a few passes over the input.
  uint64_t limit = 8 * (body_size / sizeof(capnp::word)) + 1024;
  return wire_format::read_message<wire::CheckpointIndex>(
      body, body_size, where, "checkpoint index",
      [&](wire::CheckpointIndex::Reader r) { return from_wire(r, where); }, limit);
}

}  // namespace troupe::checkpoint
