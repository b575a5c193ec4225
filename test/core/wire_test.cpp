// The tensor wire format: every dtype survives bytes and back; damaged, truncated or
// inconsistent messages and unknown versions are refused as data_loss naming where they came
// from.
#include <cstring>
#include <random>
#include <tuple>
#include <vector>

#include <boost/test/unit_test.hpp>
#include <capnp/message.h>
#include <capnp/serialize.h>

#include "core/wire/convert.hpp"
#include "core/wire/tensor.capnp.h"
#include "test/support/expect_error.hpp"
#include "test/support/random_tensor.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;
namespace wf = troupe::wire_format;

namespace {

using troupe::testing::AllTypes;
using troupe::testing::random_tensor;

Tensor round_trip(const Tensor& t) {
  auto bytes = wf::tensor_to_bytes(t);
  return wf::tensor_from_bytes(bytes.data(), bytes.size(), "round trip");
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.byte_size() == b.byte_size() &&
         (a.byte_size() == 0 || std::memcmp(a.raw_data(), b.raw_data(), a.byte_size()) == 0);
}

std::vector<unsigned char> message_bytes(capnp::MallocMessageBuilder& message) {
  auto words = capnp::messageToFlatArray(message);
  auto bytes = words.asBytes();
  return {bytes.begin(), bytes.end()};
}

// A hand-built float32 message: `bytes` data bytes under `shape`, with `version`.
std::vector<unsigned char> hand_built(uint32_t version, std::vector<int64_t> shape, std::size_t bytes) {
  capnp::MallocMessageBuilder message;
  auto t = message.initRoot<wire::Tensor>();
  t.setVersion(version);
  t.setDtype(wire::DType::FLOAT32);
  auto dims = t.initShape(unsigned(shape.size()));
  for (unsigned i = 0; i < shape.size(); ++i) dims.set(i, shape[i]);
  auto chunk = t.initChunks(1).init(0, unsigned(bytes));
  std::memset(chunk.begin(), 0, bytes);
  return message_bytes(message);
}

std::string refusal(const std::vector<unsigned char>& bytes, const std::string& where) {
  return error_of([&] { wf::tensor_from_bytes(bytes.data(), bytes.size(), where); },
                  ErrorCode::data_loss);
}

}  // namespace

BOOST_AUTO_TEST_CASE_TEMPLATE(a_tensor_of_every_dtype_survives_bytes_and_back, T, AllTypes) {
  std::mt19937 rng(7);
  Tensor t = random_tensor<T>(Shape{3, 5, 2}, rng);
  Tensor back = round_trip(t);
  BOOST_TEST(int(back.dtype()) == int(t.dtype()));
  BOOST_TEST((back.shape() == t.shape()));
  BOOST_TEST(same_bytes(back, t));
  BOOST_TEST(!back.shares_buffer_with(t));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(a_scalar_of_every_dtype_survives_bytes_and_back, T, AllTypes) {
  std::mt19937 rng(11);
  Tensor t = random_tensor<T>(Shape{}, rng);
  Tensor back = round_trip(t);
  BOOST_TEST(back.shape().is_scalar());
  BOOST_TEST(int(back.dtype()) == int(t.dtype()));
  BOOST_TEST(same_bytes(back, t));
}

BOOST_AUTO_TEST_CASE_TEMPLATE(an_empty_tensor_of_every_dtype_survives_bytes_and_back, T, AllTypes) {
  Tensor t(dtype_v<T>, Shape{0, 4});
  Tensor back = round_trip(t);
  BOOST_TEST(back.is_initialized());
  BOOST_TEST((back.shape() == Shape{0, 4}));
  BOOST_TEST(int(back.dtype()) == int(dtype_v<T>));
  BOOST_TEST(back.num_elements() == 0);
}

BOOST_AUTO_TEST_CASE(a_slice_is_written_as_its_own_rows_only) {
  std::mt19937 rng(3);
  Tensor t = random_tensor<double>(Shape{6, 3}, rng);
  Tensor back = round_trip(t.slice(2, 5));
  BOOST_TEST((back.shape() == Shape{3, 3}));
  BOOST_TEST((back.to_vector<double>() == t.slice(2, 5).to_vector<double>()));
}

BOOST_AUTO_TEST_CASE(a_tensor_larger_than_the_inline_buffer_keeps_every_value) {
  std::mt19937 rng(5);
  Tensor t = random_tensor<float>(Shape{257, 33}, rng);
  BOOST_TEST(same_bytes(round_trip(t), t));
}

BOOST_AUTO_TEST_CASE(bytes_at_an_unaligned_address_are_read_correctly) {
  std::mt19937 rng(9);
  Tensor t = random_tensor<int64_t>(Shape{7}, rng);
  auto bytes = wf::tensor_to_bytes(t);
  std::vector<unsigned char> shifted(bytes.size() + 1);
  std::memcpy(shifted.data() + 1, bytes.data(), bytes.size());
  Tensor back = wf::tensor_from_bytes(shifted.data() + 1, bytes.size(), "unaligned");
  BOOST_TEST(same_bytes(back, t));
}

BOOST_AUTO_TEST_CASE(a_truncated_message_is_refused_as_data_loss_naming_where) {
  std::mt19937 rng(1);
  auto bytes = wf::tensor_to_bytes(random_tensor<float>(Shape{16, 16}, rng));
  auto cut = bytes;
  cut.resize(bytes.size() - 64);
  auto m = refusal(cut, "checkpoint/layer1.w");
  BOOST_TEST(contains(m, "checkpoint/layer1.w"), m);
  cut.resize(8);
  m = refusal(cut, "eight bytes");
  BOOST_TEST(contains(m, "eight bytes"), m);
  m = refusal({}, "nothing");
  BOOST_TEST(contains(m, "nothing"), m);
}

BOOST_AUTO_TEST_CASE(a_length_that_is_not_whole_words_is_refused_as_data_loss_naming_where) {
  std::mt19937 rng(2);
  auto bytes = wf::tensor_to_bytes(random_tensor<float>(Shape{4}, rng));
  bytes.pop_back();
  auto m = refusal(bytes, "peer:3");
  BOOST_TEST(contains(m, "peer:3"), m);
  BOOST_TEST(contains(m, std::to_string(bytes.size())), m);
}

BOOST_AUTO_TEST_CASE(garbage_bytes_are_refused_as_data_loss_naming_where) {
  std::vector<unsigned char> junk(256, 0xff);
  auto m = refusal(junk, "junk.bin");
  BOOST_TEST(contains(m, "junk.bin"), m);
  std::mt19937 rng(4);
  for (auto& b : junk) b = static_cast<unsigned char>(rng());
  // Random bytes may happen to parse as a message, but never as a consistent tensor.
  m = refusal(junk, "noise.bin");
  BOOST_TEST(contains(m, "noise.bin"), m);
}

BOOST_AUTO_TEST_CASE(a_segment_table_claiming_more_words_than_present_is_refused) {
  std::mt19937 rng(6);
  auto bytes = wf::tensor_to_bytes(random_tensor<float>(Shape{8}, rng));
  // Word 0 holds the segment count minus one and the first segment's size in words.
  uint32_t size;
  std::memcpy(&size, bytes.data() + 4, 4);
  size += 1000;
  std::memcpy(bytes.data() + 4, &size, 4);
  auto m = refusal(bytes, "inflated");
  BOOST_TEST(contains(m, "inflated"), m);
}

BOOST_AUTO_TEST_CASE(an_unknown_version_is_refused_as_data_loss_naming_it_and_where) {
  auto m = refusal(hand_built(99, {2, 2}, 16), "model.tensor");
  BOOST_TEST(contains(m, "model.tensor"), m);
  BOOST_TEST(contains(m, "99"), m);
  // The same message with the current version reads fine.
  auto ok = hand_built(wf::kTensorVersion, {2, 2}, 16);
  Tensor t = wf::tensor_from_bytes(ok.data(), ok.size(), "model.tensor");
  BOOST_TEST((t.shape() == Shape{2, 2}));
}

BOOST_AUTO_TEST_CASE(data_of_the_wrong_size_for_the_shape_is_refused_naming_both) {
  auto m = refusal(hand_built(wf::kTensorVersion, {2, 2}, 12), "short.tensor");
  BOOST_TEST(contains(m, "short.tensor"), m);
  BOOST_TEST(contains(m, "16"), m);
  BOOST_TEST(contains(m, "12"), m);
  m = refusal(hand_built(wf::kTensorVersion, {2, 2}, 20), "long.tensor");
  BOOST_TEST(contains(m, "long.tensor"), m);
}

BOOST_AUTO_TEST_CASE(a_negative_dimension_or_invalid_dtype_is_refused) {
  auto m = refusal(hand_built(wf::kTensorVersion, {2, -2}, 0), "negative.tensor");
  BOOST_TEST(contains(m, "negative.tensor"), m);
  BOOST_TEST(contains(m, "-2"), m);
  capnp::MallocMessageBuilder message;
  auto t = message.initRoot<wire::Tensor>();
  t.setVersion(wf::kTensorVersion);
  t.setDtype(wire::DType::INVALID);
  m = refusal(message_bytes(message), "nodtype.tensor");
  BOOST_TEST(contains(m, "nodtype.tensor"), m);
}

BOOST_AUTO_TEST_CASE(a_shape_whose_element_count_overflows_is_refused_as_data_loss) {
  const int64_t big = int64_t(1) << 32;
  auto m = refusal(hand_built(wf::kTensorVersion, {big, big}, 0), "overflow.tensor");
  BOOST_TEST(contains(m, "overflow.tensor"), m);
}

BOOST_AUTO_TEST_CASE(a_shape_far_larger_than_its_data_is_refused_as_data_loss_before_allocating) {
  auto m = refusal(hand_built(wf::kTensorVersion, {int64_t(1) << 40}, 0), "claims.tensor");
  BOOST_TEST(contains(m, "claims.tensor"), m);
}

BOOST_AUTO_TEST_CASE(bytes_after_the_end_of_the_message_are_refused_as_data_loss) {
  auto bytes = wf::tensor_to_bytes(Tensor::from_vector<float>({1, 2}));
  bytes.resize(bytes.size() + 64, 0xab);
  auto m = refusal(bytes, "appended.tensor");
  BOOST_TEST(contains(m, "appended.tensor"), m);
}

BOOST_AUTO_TEST_CASE(every_dtype_maps_to_the_wire_and_back) {
  for (DType d : {DType::float32, DType::float16, DType::float64, DType::int32, DType::int64,
                  DType::uint8, DType::boolean})
    BOOST_TEST(int(wf::from_wire(wf::to_wire(d))) == int(d), name_of(d));
  BOOST_TEST(int(wf::from_wire(wf::to_wire(DType::invalid))) == int(DType::invalid));
}
