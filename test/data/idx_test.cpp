#include <filesystem>
#include <iterator>

#include <boost/test/unit_test.hpp>

#include "ops/data/idx.hpp"
#include "test/data/idx_files.hpp"
#include "test/support/expect_error.hpp"
#include "test/support/skip.hpp"

using namespace troupe;
using namespace troupe::data;
using testing::contains;
using testing::error_of;
using testing::idx_bytes;
using testing::iota_bytes;
using testing::ScratchDir;
using testing::write_gz;
using testing::write_plain;

BOOST_AUTO_TEST_SUITE(idx)

BOOST_AUTO_TEST_CASE(images_round_trip_through_a_plain_file) {
  ScratchDir dir;
  auto pixels = iota_bytes(3 * 4 * 5, 7);
  auto path =
      write_plain(dir.file("images-idx3-ubyte"), idx_bytes(kIdxImagesMagic, {3, 4, 5}, pixels));
  Tensor t = read_idx_images(path);
  BOOST_TEST(t.dtype() == DType::uint8);
  BOOST_TEST(t.shape() == (Shape{3, 4, 5}));
  BOOST_TEST(t.to_vector<uint8_t>() == pixels);
}

BOOST_AUTO_TEST_CASE(images_and_labels_round_trip_through_gzipped_files) {
  ScratchDir dir;
  auto pixels = iota_bytes(6 * 28 * 28, 3);
  std::vector<uint8_t> labels{9, 0, 3, 3, 1, 7};
  auto images_path = write_gz(dir.file("i.gz"), idx_bytes(kIdxImagesMagic, {6, 28, 28}, pixels));
  auto labels_path = write_gz(dir.file("l.gz"), idx_bytes(kIdxLabelsMagic, {6}, labels));
  LabeledImages data = read_idx(images_path, labels_path);
  BOOST_TEST(data.images.shape() == (Shape{6, 28, 28}));
  BOOST_TEST(data.images.to_vector<uint8_t>() == pixels);
  BOOST_TEST(data.labels.shape() == (Shape{6}));
  BOOST_TEST(data.labels.to_vector<uint8_t>() == labels);
}

BOOST_AUTO_TEST_CASE(an_empty_set_of_images_reads_as_a_tensor_of_no_rows) {
  ScratchDir dir;
  auto path = write_plain(dir.file("empty"), idx_bytes(kIdxImagesMagic, {0, 28, 28}, {}));
  BOOST_TEST(read_idx_images(path).shape() == (Shape{0, 28, 28}));
}

BOOST_AUTO_TEST_CASE(a_missing_file_is_refused_naming_the_file) {
  ScratchDir dir;
  std::string path = dir.file("no-such-labels.gz");
  auto message = error_of([&] { read_idx_labels(path); }, ErrorCode::not_found);
  BOOST_TEST(contains(message, "labels file '" + path + "'"), message);
}

BOOST_AUTO_TEST_CASE(a_folder_in_place_of_a_file_is_refused_naming_it) {
  ScratchDir dir;
  auto message = error_of([&] { read_idx_images(dir.path()); }, ErrorCode::not_found);
  BOOST_TEST(contains(message, "'" + dir.path() + "' is a directory"), message);
}

BOOST_AUTO_TEST_CASE(a_labels_file_read_as_images_is_refused_for_its_magic) {
  ScratchDir dir;
  auto path = write_gz(dir.file("labels.gz"), idx_bytes(kIdxLabelsMagic, {2}, {1, 2}));
  auto message = error_of([&] { read_idx_images(path); }, ErrorCode::data_loss);
  BOOST_TEST(
      contains(message, "images file '" + path + "' has magic 0x00000801, expected 0x00000803"),
      message);
}

BOOST_AUTO_TEST_CASE(a_file_that_is_not_idx_at_all_is_refused_for_its_magic) {
  ScratchDir dir;
  auto path = write_plain(dir.file("readme.txt"), {'h', 'e', 'l', 'l', 'o', '\n'});
  auto message = error_of([&] { read_idx_labels(path); }, ErrorCode::data_loss);
  BOOST_TEST(contains(message, "labels file '" + path + "' has magic 0x68656c6c"), message);
}

BOOST_AUTO_TEST_CASE(a_truncated_images_file_is_refused_naming_the_file) {
  ScratchDir dir;
  // 2 images of 28x28 declared: 16 + 1568 bytes; 1234 - 16 present.
  auto bytes = idx_bytes(kIdxImagesMagic, {2, 28, 28}, iota_bytes(1234 - 16));
  for (auto path : {write_plain(dir.file("train-images-idx3-ubyte"), bytes),
                    write_gz(dir.file("train-images-idx3-ubyte.gz"), bytes)}) {
    auto message = error_of([&] { read_idx_images(path); }, ErrorCode::data_loss);
    BOOST_TEST(message == "images file '" + path + "' ends after 1234 of 1584 bytes");
  }
}

BOOST_AUTO_TEST_CASE(a_gzip_stream_cut_short_is_refused_as_truncated) {
  ScratchDir dir;
  auto full = write_gz(dir.file("full.gz"), idx_bytes(kIdxLabelsMagic, {5000}, iota_bytes(5000)));
  std::ifstream in(full, std::ios::binary);
  std::vector<uint8_t> compressed((std::istreambuf_iterator<char>(in)), {});
  compressed.resize(compressed.size() / 2);
  auto path = write_plain(dir.file("cut.gz"), compressed);
  auto message = error_of([&] { read_idx_labels(path); }, ErrorCode::data_loss);
  BOOST_TEST(contains(message, "labels file '" + path + "' ends after "), message);
  BOOST_TEST(contains(message, " of 5008 bytes"), message);
}

BOOST_AUTO_TEST_CASE(a_file_ending_inside_its_header_is_refused) {
  ScratchDir dir;
  auto bytes = idx_bytes(kIdxImagesMagic, {2, 28, 28}, {});
  bytes.resize(10);
  auto path = write_plain(dir.file("short"), bytes);
  auto message = error_of([&] { read_idx_images(path); }, ErrorCode::data_loss);
  BOOST_TEST(message ==
             "images file '" + path + "' ends after 10 bytes, inside its 16-byte header");
}

BOOST_AUTO_TEST_CASE(trailing_bytes_are_refused_naming_the_file) {
  ScratchDir dir;
  auto bytes = idx_bytes(kIdxLabelsMagic, {3}, {1, 2, 3, 4, 5});
  for (auto path : {write_plain(dir.file("l"), bytes), write_gz(dir.file("l.gz"), bytes)}) {
    auto message = error_of([&] { read_idx_labels(path); }, ErrorCode::data_loss);
    BOOST_TEST(message ==
               "labels file '" + path + "' has 2 trailing bytes after the 11 its header declares");
  }
}

BOOST_AUTO_TEST_CASE(a_header_declaring_an_absurd_size_is_refused_before_allocating) {
  ScratchDir dir;
  auto path =
      write_gz(dir.file("huge.gz"), idx_bytes(kIdxImagesMagic, {4000000000u, 60000, 60000}, {}));
  auto message = error_of([&] { read_idx_images(path); }, ErrorCode::data_loss);
  BOOST_TEST(
      contains(message, "images file '" + path + "' declares shape [4000000000,60000,60000]"),
      message);
}

BOOST_AUTO_TEST_CASE(images_and_labels_of_different_counts_are_refused_naming_both_files) {
  ScratchDir dir;
  auto images = write_gz(dir.file("i.gz"), idx_bytes(kIdxImagesMagic, {3, 2, 2}, iota_bytes(12)));
  auto labels = write_gz(dir.file("l.gz"), idx_bytes(kIdxLabelsMagic, {4}, {0, 1, 2, 3}));
  auto message = error_of([&] { read_idx(images, labels); }, ErrorCode::data_loss);
  BOOST_TEST(message == "images file '" + images + "' holds 3 images but labels file '" + labels +
                            "' holds 4 labels");
}

BOOST_AUTO_TEST_CASE(fashion_mnist_finds_plain_or_gzipped_files_in_a_given_folder) {
  ScratchDir dir;
  write_gz(dir.file("t10k-images-idx3-ubyte.gz"),
           idx_bytes(kIdxImagesMagic, {2, 28, 28}, iota_bytes(2 * 784)));
  write_plain(dir.file("t10k-labels-idx1-ubyte"), idx_bytes(kIdxLabelsMagic, {2}, {4, 9}));
  LabeledImages test = fashion_mnist(dir.path(), Split::test);
  BOOST_TEST(test.images.shape() == (Shape{2, 28, 28}));
  BOOST_TEST(test.labels.to_vector<uint8_t>() == (std::vector<uint8_t>{4, 9}));

  auto message = error_of([&] { fashion_mnist(dir.path(), Split::train); }, ErrorCode::not_found);
  BOOST_TEST(contains(message, dir.file("train-images-idx3-ubyte.gz")), message);
  BOOST_TEST(contains(message, "dataset-fashion-mnist"), message);
}

BOOST_AUTO_TEST_CASE(fashion_mnist_refuses_a_label_outside_0_to_9) {
  ScratchDir dir;
  write_gz(dir.file("train-images-idx3-ubyte.gz"),
           idx_bytes(kIdxImagesMagic, {2, 28, 28}, iota_bytes(2 * 784)));
  auto labels =
      write_gz(dir.file("train-labels-idx1-ubyte.gz"), idx_bytes(kIdxLabelsMagic, {2}, {4, 10}));
  auto message = error_of([&] { fashion_mnist(dir.path(), Split::train); }, ErrorCode::data_loss);
  BOOST_TEST(message == "labels file '" + labels + "' holds label 10 at index 1, outside 0..9");
}

BOOST_AUTO_TEST_CASE(the_installed_fashion_mnist_has_60000_training_and_10000_test_images_of_10_classes,
                     *troupe::testing::runs_here([] {
                       return std::filesystem::exists(kFashionMnistDir)
                                  ? std::string()
                                  : std::string(kFashionMnistDir) + " is missing (apt-get install dataset-fashion-mnist)";
                     })) {
  for (auto [split, n] : {std::pair{Split::train, 60000}, std::pair{Split::test, 10000}}) {
    LabeledImages data = fashion_mnist(split);
    BOOST_TEST(data.images.shape() == (Shape{n, 28, 28}));
    BOOST_TEST(data.labels.shape() == (Shape{n}));
    std::vector<int64_t> per_class(10, 0);
    for (uint8_t label : data.labels.to_vector<uint8_t>()) {
      BOOST_REQUIRE(label <= 9);
      ++per_class[label];
    }
    for (int64_t count : per_class) BOOST_TEST(count == n / 10);  // the classes are balanced
  }
}

BOOST_AUTO_TEST_SUITE_END()
