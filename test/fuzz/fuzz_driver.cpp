// A deterministic stand-in for libFuzzer, for ctest (g++ has no -fsanitize=fuzzer): feeds the
// target valid checkpoint indexes and 20,000 mutations of them (bit flips, truncations,
// random bytes, words made into huge Cap'n Proto pointers and lengths, splices). A crash, an
// exception other than troupe::Error or a hang fails the test (ctest's timeout catches the last).
// tools/fuzz_checkpoint.sh runs the real fuzzer, seeded by `fuzz_driver --seeds DIR`.
//   fuzz_driver [RUNS]        feeds the seeds and RUNS mutations (default 20,000)
//   fuzz_driver --seeds DIR   writes the seeds into DIR, one file each
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "core/checkpoint.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, std::size_t size);

namespace ck = troupe::checkpoint;
using Bytes = std::vector<unsigned char>;

namespace {

std::vector<Bytes> seeds() {
  using troupe::DType;
  using troupe::Shape;
  std::vector<ck::Index> indexes(3);
  indexes[1].global_step = 42;
  indexes[1].entries = {{"w", DType::float32, Shape{10, 4}, 0, 10, "shard-00000-of-00001.data", 0, 160, 7},
                        {"step", DType::int64, Shape{}, 0, 1, "shard-00000-of-00001.data", 160, 8, 9}};
  indexes[2].global_step = 7;
  indexes[2].created_unix_ms = 1700000000000;
  indexes[2].entries = {{"layer/kernel", DType::float16, Shape{6, 2, 3}, 0, 2, "a.data", 0, 24, 1},
                        {"layer/kernel", DType::float16, Shape{6, 2, 3}, 2, 4, "b.data", 0, 48, 2},
                        {"empty", DType::boolean, Shape{0, 5}, 0, 0, "a.data", 24, 0, 0}};
  std::vector<Bytes> out;
  for (const auto& index : indexes) {
    Bytes bytes = ck::index_to_bytes(index);
    out.push_back(bytes);                               // whole file
    out.push_back(Bytes(bytes.begin() + 16, bytes.end()));  // the message alone (the target frames it)
  }
  return out;
}

Bytes mutate(const std::vector<Bytes>& pool, std::mt19937_64& rng) {
  Bytes b = pool[rng() % pool.size()];
  auto word_at = [&](std::size_t i, uint64_t v) {
    if (b.size() >= 8) std::memcpy(b.data() + (i % (b.size() / 8)) * 8, &v, 8);
  };
  int mutations = 1 + int(rng() % 4);
  for (int m = 0; m < mutations; ++m) {
    switch (rng() % 7) {
      case 0:  // bit flips
        if (!b.empty()) b[rng() % b.size()] ^= (unsigned char)(1u << (rng() % 8));
        break;
      case 1:  // truncation
        b.resize(b.empty() ? 0 : rng() % b.size());
        break;
      case 2: {  // random bytes, anywhere
        std::size_t n = rng() % 64;
        for (std::size_t i = 0; i < n && !b.empty(); ++i) b[rng() % b.size()] = (unsigned char)rng();
        break;
      }
      case 3: {  // a word made into a pointer with huge counts or offsets
        static const uint64_t huge[] = {~uint64_t(0), 0xFFFFFFF800000001ull, 0xFFFFFFFF00000001ull,
                                        0x0000FFFFFFFFFFFCull, 0x7FFFFFFC00000000ull,
                                        0xFFFFFFFD00000001ull, 0x00000000FFFFFFF8ull,
                                        0xFFFFFFFF7FFFFFFEull, 0x0000000200000002ull};
        word_at(rng(), huge[rng() % (sizeof huge / sizeof huge[0])]);
        break;
      }
      case 4:  // a length-like field set to a huge value at a random byte offset
        if (b.size() >= 4) {
          uint32_t v = uint32_t(rng()) | 0xF0000000u;
          std::memcpy(b.data() + rng() % (b.size() - 3), &v, 4);
        }
        break;
      case 5: {  // splice: the tail of another seed
        const Bytes& other = pool[rng() % pool.size()];
        std::size_t cut = b.empty() ? 0 : rng() % b.size();
        std::size_t from = other.empty() ? 0 : rng() % other.size();
        b.resize(cut);
        b.insert(b.end(), other.begin() + long(from), other.end());
        break;
      }
      default: {  // random input of random length
        b.resize(rng() % 512);
        for (auto& c : b) c = (unsigned char)rng();
        break;
      }
    }
  }
  return b;
}

}  // namespace

int main(int argc, char** argv) {
  auto pool = seeds();
  if (argc == 3 && std::string(argv[1]) == "--seeds") {
    for (std::size_t i = 0; i < pool.size(); ++i) {
      std::string path = std::string(argv[2]) + "/seed-" + std::to_string(i);
      std::FILE* f = std::fopen(path.c_str(), "wb");
      if (!f || std::fwrite(pool[i].data(), 1, pool[i].size(), f) != pool[i].size() || std::fclose(f) != 0) {
        std::fprintf(stderr, "fuzz_driver: cannot write %s\n", path.c_str());
        return 1;
      }
    }
    return 0;
  }
  long runs = argc > 1 ? std::atol(argv[1]) : 20000;
  for (const auto& s : pool) LLVMFuzzerTestOneInput(s.data(), s.size());
  std::mt19937_64 rng(20261123);
  for (long i = 0; i < runs; ++i) {
    Bytes input = mutate(pool, rng);
    LLVMFuzzerTestOneInput(input.data(), input.size());
  }
  std::printf("checkpoint index fuzz driver: %ld inputs, no crash\n", runs + long(pool.size()));
  return 0;
}
