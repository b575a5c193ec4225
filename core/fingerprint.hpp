#pragma once
// 64-bit fingerprints that every process and every build computes alike, for ids that cross
// process boundaries (a loop's frame id, a stack's key). std::hash is unsuitable: its values are
// unspecified and differ between standard libraries and their versions.
//
//   fnv1a64(bytes)        FNV-1a, 64 bits: offset basis 0xcbf29ce484222325, prime 0x100000001b3
//   mix64(x)              splitmix64's finaliser (Steele, Lea, Flood 2014): spreads every input bit
//   fingerprint64(bytes)  mix64(fnv1a64(bytes))
#include <cstdint>
#include <string_view>

namespace troupe {

constexpr uint64_t fnv1a64(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : bytes) {
    h ^= uint64_t(static_cast<unsigned char>(c));
    h *= 0x100000001b3ULL;
  }
  return h;
}

constexpr uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

constexpr uint64_t fingerprint64(std::string_view bytes) { return mix64(fnv1a64(bytes)); }

}  // namespace troupe
