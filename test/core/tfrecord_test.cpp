// TFRecord framing (core/tfrecord.hpp): the bytes TensorFlow's format has (checked against a
// record framed by an independent implementation), a round trip, and every kind of damage found
// and named.
#include <boost/test/unit_test.hpp>

#include <filesystem>
#include <fstream>

#include "core/tfrecord.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/scratch_dir.hpp"

using namespace troupe;
using troupe::testing::contains;
using troupe::testing::error_of;

namespace {

std::string bytes_of(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_record_has_the_bytes_of_tensorflows_format) {
  BOOST_TEST(masked_crc32c("hello", 5) == 0x191c1fbbu);
  troupe::testing::ScratchDir dir;
  {
    RecordWriter w(dir.file("one"));
    w.write("hello");
  }
  // Framed by a bit-at-a-time CRC-32C in Python: length 5, its masked CRC, "hello", its masked CRC.
  const std::string expected("\x05\0\0\0\0\0\0\0\xea\xb2\x04\x3e" "hello" "\xbb\x1f\x1c\x19", 21);
  BOOST_TEST(bytes_of(dir.file("one")) == expected);
}

BOOST_AUTO_TEST_CASE(records_round_trip_and_a_writer_appends) {
  troupe::testing::ScratchDir dir;
  const std::string big(100000, 'x');
  {
    RecordWriter w(dir.file("r"));
    w.write("");
    w.write(big);
    w.flush();
  }
  RecordWriter(dir.file("r")).write(std::string("\0\1\2", 3));
  const auto records = read_records(dir.file("r"));
  BOOST_TEST_REQUIRE(records.size() == 3u);
  BOOST_TEST(records[0].empty());
  BOOST_TEST(records[1] == big);
  BOOST_TEST(records[2] == std::string("\0\1\2", 3));
}

BOOST_AUTO_TEST_CASE(a_damaged_or_cut_record_is_named_with_its_offset) {
  troupe::testing::ScratchDir dir;
  {
    RecordWriter w(dir.file("r"));
    w.write("first");
    w.write("second");
  }
  const std::string good = bytes_of(dir.file("r"));
  auto with = [&](std::string bytes) {
    std::ofstream(dir.file("bad"), std::ios::binary) << bytes;
    return dir.file("bad");
  };
  std::string flipped = good;
  flipped[21 + 12 + 2] ^= 0x40;  // a byte of "second"
  auto m = error_of([&] { read_records(with(flipped)); }, ErrorCode::data_loss);
  BOOST_TEST(contains(m, "the data of the record at byte 21 fails its checksum"), m);
  std::string length = good;
  length[21] = 7;
  m = error_of([&] { read_records(with(length)); }, ErrorCode::data_loss);
  BOOST_TEST(contains(m, "the length of the record at byte 21 fails its checksum"), m);
  const std::string cut = good.substr(0, good.size() - 3);
  m = error_of([&] { read_records(with(cut)); }, ErrorCode::data_loss);
  BOOST_TEST(contains(m, "the record at byte 21 is cut short"), m);
  // A file still being written: its last, partial record is left out when asked.
  const auto records = read_records(with(cut), /*allow_partial_tail=*/true);
  BOOST_TEST((records == std::vector<std::string>{"first"}));
  m = error_of([&] { read_records(dir.file("none")); }, ErrorCode::not_found);
  BOOST_TEST(contains(m, "none"), m);
}
