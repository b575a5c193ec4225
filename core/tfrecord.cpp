#include "core/tfrecord.hpp"

#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <iterator>

#include "core/crc32c.hpp"
#include "core/error.hpp"

namespace troupe {
namespace {

constexpr uint32_t kMaskDelta = 0xa282ead8u;

void put_le(std::string& out, uint64_t value, int bytes) {
  for (int i = 0; i < bytes; ++i) out.push_back(char((value >> (8 * i)) & 0xff));
}

uint64_t get_le(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = bytes - 1; i >= 0; --i) v = (v << 8) | uint8_t(p[i]);
  return v;
}

}  // namespace

uint32_t masked_crc32c(const void* data, std::size_t size) {
  const uint32_t crc = crc32c(data, size);
  return ((crc >> 15) | (crc << 17)) + kMaskDelta;
}

RecordWriter::RecordWriter(std::string path) : path_(std::move(path)) {
  file_ = std::fopen(path_.c_str(), "ab");
  if (!file_) fail(ErrorCode::unavailable, "cannot open record file '{}': {}", path_, std::strerror(errno));
}

RecordWriter::~RecordWriter() {
  try {
    flush();
  } catch (const Error&) {
  }
  std::fclose(file_);
}

void RecordWriter::write(std::string_view data) {
  std::string header;
  put_le(header, data.size(), 8);
  put_le(header, masked_crc32c(header.data(), header.size()), 4);
  std::string footer;
  put_le(footer, masked_crc32c(data.data(), data.size()), 4);
  if (std::fwrite(header.data(), 1, header.size(), file_) != header.size() ||
      std::fwrite(data.data(), 1, data.size(), file_) != data.size() ||
      std::fwrite(footer.data(), 1, footer.size(), file_) != footer.size())
    fail(ErrorCode::unavailable, "cannot write a record to '{}': {}", path_, std::strerror(errno));
}

void RecordWriter::flush() {
  if (std::fflush(file_) != 0 || ::fsync(::fileno(file_)) != 0)
    fail(ErrorCode::unavailable, "cannot flush record file '{}': {}", path_, std::strerror(errno));
}

std::vector<std::string> read_records(const std::string& path, bool allow_partial_tail) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(ErrorCode::not_found, "cannot read record file '{}': {}", path, std::strerror(errno));
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<std::string> out;
  std::size_t at = 0;
  while (at < bytes.size()) {
    auto cut_short = [&] {
      if (allow_partial_tail) return;
      fail(ErrorCode::data_loss, "record file '{}': the record at byte {} is cut short ({} bytes left)", path, at,
           bytes.size() - at);
    };
    if (bytes.size() - at < 12) {
      cut_short();
      break;
    }
    const uint64_t length = get_le(bytes.data() + at, 8);
    if (uint32_t(get_le(bytes.data() + at + 8, 4)) != masked_crc32c(bytes.data() + at, 8))
      fail(ErrorCode::data_loss, "record file '{}': the length of the record at byte {} fails its checksum", path, at);
    if (bytes.size() - at - 12 < length + 4) {
      cut_short();
      break;
    }
    const char* data = bytes.data() + at + 12;
    if (uint32_t(get_le(data + length, 4)) != masked_crc32c(data, length))
      fail(ErrorCode::data_loss, "record file '{}': the data of the record at byte {} fails its checksum", path, at);
    out.emplace_back(data, length);
    at += 12 + length + 4;
  }
  return out;
}

}  // namespace troupe
