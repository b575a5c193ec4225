// Fuzz target of the checkpoint index reader (checkpoint::parse_index): any input is refused
// with a troupe::Error or parsed; never a crash, another exception, a hang or a huge
// allocation. Built with libFuzzer by tools/fuzz_checkpoint.sh, and with a deterministic
// driver (fuzz_driver.cpp) in ctest.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/checkpoint.hpp"
#include "core/crc32c.hpp"

namespace {

// Puts the index header of core/checkpoint.hpp ("TRCKPIDX", crc32c, 4 zero bytes) in front
// of `data`, so that mutations of the message reach the Cap'n Proto reader instead of
// stopping at the checksum.
std::vector<unsigned char> framed(const uint8_t* data, std::size_t size) {
  std::vector<unsigned char> out(16 + size);
  std::memcpy(out.data(), "TRCKPIDX", 8);
  uint32_t crc = troupe::crc32c(data, size);
  for (int i = 0; i < 4; ++i) out[8 + i] = static_cast<unsigned char>(crc >> (8 * i));
  if (size) std::memcpy(out.data() + 16, data, size);
  return out;
}

void parse(const unsigned char* data, std::size_t size) {
  try {
    troupe::checkpoint::Index index = troupe::checkpoint::parse_index(data, size, "fuzz input");
    // A parsed index is one that writes back to bytes that parse again.
    auto bytes = troupe::checkpoint::index_to_bytes(index);
    troupe::checkpoint::parse_index(bytes.data(), bytes.size(), "fuzz round trip");
  } catch (const troupe::Error&) {
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size) {
  parse(data, size);
  auto with_header = framed(data, size);
  parse(with_header.data(), with_header.size());
  return 0;
}
