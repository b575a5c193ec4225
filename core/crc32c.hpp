#pragma once
// CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), the checksum of checkpoint files.
// Uses SSE4.2's crc32 instruction when the CPU has it (checked once at run time), else a
// slicing-by-8 table. crc32c("123456789") == 0xE3069283.
#include <cstddef>
#include <cstdint>

namespace troupe {

// The CRC-32C of `size` bytes at `data`, continuing from `crc` (the CRC of the bytes before
// them; 0 for none): crc32c(ab) == crc32c(b, crc32c(a)).
uint32_t crc32c(const void* data, std::size_t size, uint32_t crc = 0);

}  // namespace troupe
