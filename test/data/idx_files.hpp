#pragma once
// Small IDX files for the data tests: built in memory, written plain or gzip'd into a
// ScratchDir (test/support/scratch_dir.hpp), which is removed when the test ends.
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <stdexcept>
#include <string>
#include <vector>

#include <zlib.h>

#include "test/support/scratch_dir.hpp"

namespace troupe::testing {

// The bytes of an IDX file: magic, big-endian dims, then payload as given (which may be
// shorter or longer than the dims declare).
inline std::vector<uint8_t> idx_bytes(uint32_t magic, const std::vector<uint32_t>& dims,
                                      const std::vector<uint8_t>& payload) {
  std::vector<uint8_t> bytes;
  auto put = [&](uint32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(uint8_t(v >> shift));
  };
  put(magic);
  for (uint32_t d : dims) put(d);
  bytes.insert(bytes.end(), payload.begin(), payload.end());
  return bytes;
}

inline std::vector<uint8_t> iota_bytes(std::size_t n, uint8_t first = 0) {
  std::vector<uint8_t> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = uint8_t(first + i);
  return v;
}

inline std::string write_plain(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
  return path;
}

inline std::string write_gz(const std::string& path, const std::vector<uint8_t>& bytes) {
  gzFile f = gzopen(path.c_str(), "wb");
  if (f == nullptr) throw std::runtime_error("cannot gzopen " + path);
  int wrote = bytes.empty() ? 0 : gzwrite(f, bytes.data(), unsigned(bytes.size()));
  if (gzclose(f) != Z_OK || wrote != int(bytes.size()))
    throw std::runtime_error("cannot gzwrite " + path);
  return path;
}

}  // namespace troupe::testing
