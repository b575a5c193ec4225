// Tensors past Cap'n Proto's limits: more than the default 64 MiB traversal limit, and more
// than one Data (2^29 - 1 bytes), which the wire format splits into chunks.
#include <boost/test/unit_test.hpp>

#include <cstring>

#include "core/wire/convert.hpp"

using namespace troupe;

namespace {

Tensor patterned(int64_t elements) {
  Tensor t(DType::float32, Shape{elements});
  auto* p = t.data<float>();
  for (int64_t i = 0; i < elements; ++i) p[i] = float(i % 1000003);
  return t;
}

void round_trip(int64_t elements) {
  auto t = patterned(elements);
  auto bytes = wire_format::tensor_to_bytes(t);
  auto back = wire_format::tensor_from_bytes(bytes.data(), bytes.size(), "large");
  BOOST_TEST(back.describe() == t.describe());
  BOOST_TEST(std::memcmp(back.raw_data(), t.raw_data(), t.byte_size()) == 0);
}

}  // namespace

BOOST_AUTO_TEST_CASE(an_80_mib_tensor_passes_the_traversal_limit) {
  round_trip(int64_t(80) << 18);  // 80 MiB of float32
}

BOOST_AUTO_TEST_CASE(a_tensor_larger_than_one_capnp_data_travels_in_chunks) {
  round_trip((int64_t(512) << 18) + 1000);  // 512 MiB + 4000 bytes: two chunks
}
