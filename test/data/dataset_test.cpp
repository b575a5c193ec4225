#include <algorithm>
#include <cmath>
#include <numeric>

#include <boost/test/unit_test.hpp>

#include "ops/data/dataset.hpp"
#include "test/data/idx_files.hpp"
#include "test/support/expect_error.hpp"

using namespace troupe;
using namespace troupe::data;
using testing::contains;
using testing::error_of;

namespace {

// n examples of 4x5 pixels; the first pixel of example i is i and its label is i % 10, so a
// batch row tells which example it holds.
LabeledImages numbered(int64_t n) {
  LabeledImages data{Tensor::zeros(DType::uint8, Shape{n, 4, 5}), Tensor(DType::uint8, Shape{n})};
  for (int64_t i = 0; i < n; ++i) {
    data.images.data<uint8_t>()[i * 20] = uint8_t(i);
    data.labels.data<uint8_t>()[i] = uint8_t(i % 10);
  }
  return data;
}

// The examples a batch holds, read back from its first pixels; checks each label on the way.
std::vector<int64_t> examples_of(const Batch& b) {
  std::vector<int64_t> ids;
  const float* x = b.images.data<float>();
  for (int64_t r = 0; r < b.labels.num_elements(); ++r) {
    int64_t id = std::lround(x[r * 20] * 255.f);
    BOOST_TEST(b.labels.data<int32_t>()[r] == id % 10);
    ids.push_back(id);
  }
  return ids;
}

std::vector<int64_t> all_examples(const Batches& batches) {
  std::vector<int64_t> ids;
  for (const Batch& b : batches) {
    auto part = examples_of(b);
    ids.insert(ids.end(), part.begin(), part.end());
  }
  return ids;
}

std::vector<int64_t> iota(int64_t n) {
  std::vector<int64_t> v(std::size_t(n), 0);
  std::iota(v.begin(), v.end(), int64_t(0));
  return v;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(dataset)

BOOST_AUTO_TEST_CASE(images_become_float32_with_a_channel_and_labels_int32) {
  auto ds = Dataset::from_images(numbered(7));
  BOOST_TEST(ds.size() == 7);
  BOOST_TEST(ds.images().dtype() == DType::float32);
  BOOST_TEST(ds.images().shape() == (Shape{7, 1, 4, 5}));
  BOOST_TEST(ds.labels().dtype() == DType::int32);
  BOOST_TEST(ds.labels().to_vector<int32_t>() == (std::vector<int32_t>{0, 1, 2, 3, 4, 5, 6}));
}

BOOST_AUTO_TEST_CASE(pixels_are_scaled_to_zero_one) {
  LabeledImages data{Tensor::from_vector<uint8_t>({0, 51, 255, 128}, Shape{1, 2, 2}),
                     Tensor::from_vector<uint8_t>({3})};
  auto x = Dataset::from_images(data).images().to_vector<float>();
  BOOST_TEST(x[0] == 0.f);
  BOOST_TEST(x[1] == 0.2f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(x[2] == 1.f);
  BOOST_TEST(x[3] == 128.f / 255.f, boost::test_tools::tolerance(1e-6f));
}

BOOST_AUTO_TEST_CASE(normalization_subtracts_the_mean_and_divides_by_the_stddev) {
  LabeledImages data{Tensor::from_vector<uint8_t>({0, 255}, Shape{1, 1, 2}),
                     Tensor::from_vector<uint8_t>({0})};
  auto x = Dataset::from_images(data, {.mean = 0.5f, .stddev = 0.25f}).images().to_vector<float>();
  BOOST_TEST(x[0] == -2.f, boost::test_tools::tolerance(1e-6f));
  BOOST_TEST(x[1] == 2.f, boost::test_tools::tolerance(1e-6f));
  auto message = error_of([&] { Dataset::from_images(data, {.mean = 0.f, .stddev = 0.f}); },
                          ErrorCode::invalid_argument);
  BOOST_TEST(contains(message, "positive stddev"), message);
}

BOOST_AUTO_TEST_CASE(a_dataset_reads_its_idx_files) {
  testing::ScratchDir dir;
  auto images = testing::write_gz(dir.file("i.gz"),
                                  testing::idx_bytes(kIdxImagesMagic, {2, 1, 2}, {0, 255, 255, 0}));
  auto labels =
      testing::write_plain(dir.file("l"), testing::idx_bytes(kIdxLabelsMagic, {2}, {8, 1}));
  auto ds = Dataset::from_idx(images, labels);
  BOOST_TEST(ds.images().to_vector<float>() == (std::vector<float>{0.f, 1.f, 1.f, 0.f}));
  BOOST_TEST(ds.labels().to_vector<int32_t>() == (std::vector<int32_t>{8, 1}));
}

BOOST_AUTO_TEST_CASE(shuffle_is_a_permutation) {
  auto ds = Dataset::from_images(numbered(100));
  auto order = ds.shuffle(42, 0);
  BOOST_TEST(order != iota(100));
  std::sort(order.begin(), order.end());
  BOOST_TEST(order == iota(100));
}

BOOST_AUTO_TEST_CASE(shuffle_is_deterministic_per_seed_and_epoch) {
  auto ds = Dataset::from_images(numbered(100));
  BOOST_TEST(ds.shuffle(42, 3) == ds.shuffle(42, 3));
  BOOST_TEST(Dataset::from_images(numbered(100)).shuffle(42, 3) == ds.shuffle(42, 3));
  // Fixed across runs and platforms (the shuffle is written out, not std::shuffle): pinned.
  auto order = ds.shuffle(1, 0);
  BOOST_TEST(std::vector<int64_t>(order.begin(), order.begin() + 5) ==
             (std::vector<int64_t>{51, 21, 50, 81, 45}));
}

BOOST_AUTO_TEST_CASE(shuffle_differs_between_epochs_and_between_seeds) {
  auto ds = Dataset::from_images(numbered(100));
  BOOST_TEST(ds.shuffle(42, 0) != ds.shuffle(42, 1));
  BOOST_TEST(ds.shuffle(42, 1) != ds.shuffle(42, 2));
  BOOST_TEST(ds.shuffle(42, 0) != ds.shuffle(43, 0));
}

BOOST_AUTO_TEST_CASE(batches_cover_every_example_exactly_once_per_epoch) {
  auto ds = Dataset::from_images(numbered(103));
  BOOST_TEST(all_examples(ds.batches(10, Order::sequential(), Remainder::keep)) == iota(103));
  for (int64_t epoch = 0; epoch < 3; ++epoch) {
    auto order = Order::shuffled(7, epoch);
    auto seen = all_examples(ds.batches(10, order, Remainder::keep));
    BOOST_TEST(seen == ds.shuffle(7, epoch));  // in the epoch's permutation
    std::sort(seen.begin(), seen.end());
    BOOST_TEST(seen == iota(103));
  }
}

BOOST_AUTO_TEST_CASE(the_last_partial_batch_is_kept_when_asked) {
  auto ds = Dataset::from_images(numbered(103));
  auto batches = ds.batches(10, Order::shuffled(1, 0), Remainder::keep);
  BOOST_TEST(batches.size() == 11);
  BOOST_TEST(batches.batch_size() == 10);
  BOOST_TEST(batches[9].images.shape() == (Shape{10, 1, 4, 5}));
  BOOST_TEST(batches[10].images.shape() == (Shape{3, 1, 4, 5}));
  BOOST_TEST(batches[10].labels.shape() == (Shape{3}));
  // A batch larger than the dataset is one partial batch.
  auto one = ds.batches(500, Order::sequential(), Remainder::keep);
  BOOST_TEST(one.size() == 1);
  BOOST_TEST(one[0].labels.num_elements() == 103);
}

BOOST_AUTO_TEST_CASE(drop_remainder_leaves_out_the_partial_batch) {
  auto ds = Dataset::from_images(numbered(103));
  auto batches = ds.batches(10, Order::shuffled(1, 0), Remainder::drop);
  BOOST_TEST(batches.size() == 10);
  for (const Batch& b : batches) BOOST_TEST(b.images.shape() == (Shape{10, 1, 4, 5}));
  auto seen = all_examples(batches);
  auto order = ds.shuffle(1, 0);
  BOOST_TEST(seen == std::vector<int64_t>(order.begin(), order.begin() + 100));
  BOOST_TEST(ds.batches(103, Order::sequential(), Remainder::drop).size() == 1);
}

BOOST_AUTO_TEST_CASE(sequential_batches_are_zero_copy_slices_and_shuffled_ones_copies) {
  auto ds = Dataset::from_images(numbered(20));
  Batch b = ds.batches(8, Order::sequential(), Remainder::keep)[1];
  BOOST_TEST(b.images.shares_buffer_with(ds.images()));
  BOOST_TEST(b.labels.shares_buffer_with(ds.labels()));
  BOOST_TEST(examples_of(b) == (std::vector<int64_t>{8, 9, 10, 11, 12, 13, 14, 15}));
  Batch s = ds.batches(8, Order::shuffled(3, 0), Remainder::keep)[0];
  BOOST_TEST(!s.images.shares_buffer_with(ds.images()));
  // The batches outlive the dataset they came from.
  Batches kept =
      Dataset::from_images(numbered(20)).batches(8, Order::shuffled(3, 0), Remainder::keep);
  BOOST_TEST(examples_of(kept[0]) == examples_of(s));
}

BOOST_AUTO_TEST_CASE(a_batch_size_of_zero_is_refused) {
  auto ds = Dataset::from_images(numbered(10));
  auto message = error_of([&] { ds.batches(0, Order::sequential(), Remainder::keep); },
                          ErrorCode::invalid_argument);
  BOOST_TEST(message == "Dataset: batch size must be at least 1, got 0");
}

BOOST_AUTO_TEST_CASE(a_batch_size_larger_than_the_dataset_is_refused_when_dropping_the_remainder) {
  auto ds = Dataset::from_images(numbered(10));
  auto message = error_of([&] { ds.batches(11, Order::shuffled(1, 0), Remainder::drop); },
                          ErrorCode::invalid_argument);
  BOOST_TEST(contains(message, "batch size 11 is larger than the 10 examples"), message);
}

BOOST_AUTO_TEST_CASE(a_batch_index_out_of_range_is_refused) {
  auto batches =
      Dataset::from_images(numbered(10)).batches(4, Order::sequential(), Remainder::keep);
  auto message = error_of([&] { batches[3]; }, ErrorCode::invalid_argument);
  BOOST_TEST(message == "Batches: batch 3 out of range [0, 3)");
}

BOOST_AUTO_TEST_CASE(images_and_labels_of_different_counts_are_refused) {
  auto data = numbered(5);
  data.labels = data.labels.slice(0, 4);
  auto message = error_of([&] { Dataset::from_images(data); }, ErrorCode::invalid_argument);
  BOOST_TEST(message == "Dataset: 5 images but 4 labels");
}

BOOST_AUTO_TEST_SUITE_END()
