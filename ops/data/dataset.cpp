#include "ops/data/dataset.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <iterator>
#include <numeric>

namespace troupe::data {
namespace {

// splitmix64 (Steele, Lea, Flood 2014): the shuffle is written out rather than taken from
// std::shuffle, whose sequence differs between standard libraries.
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [0, bound) without modulo bias (Lemire 2019).
uint64_t uniform_below(uint64_t& state, uint64_t bound) {
  unsigned __int128 m = (unsigned __int128)splitmix64(state) * bound;
  if (uint64_t(m) < bound) {
    uint64_t threshold = -bound % bound;
    while (uint64_t(m) < threshold) m = (unsigned __int128)splitmix64(state) * bound;
  }
  return uint64_t(m >> 64);
}

}  // namespace

static_assert(std::input_iterator<Batches::iterator>);

Dataset Dataset::from_images(const LabeledImages& data, Normalization normalization) {
  const Tensor& images = data.images;
  const Tensor& labels = data.labels;
  TROUPE_CHECK_ARG(images.dtype() == DType::uint8 && images.shape().rank() == 3,
                   "Dataset: images must be uint8 [N, H, W], got {}", images.describe());
  TROUPE_CHECK_ARG(labels.dtype() == DType::uint8 && labels.shape().rank() == 1,
                   "Dataset: labels must be uint8 [N], got {}", labels.describe());
  TROUPE_CHECK_ARG(images.shape()[0] == labels.shape()[0], "Dataset: {} images but {} labels",
                   images.shape()[0], labels.shape()[0]);
  TROUPE_CHECK_ARG(std::isfinite(normalization.mean) && std::isfinite(normalization.stddev) &&
                       normalization.stddev > 0.f,
                   "Dataset: normalization needs a finite mean and a positive stddev, got mean {} "
                   "stddev {}",
                   normalization.mean, normalization.stddev);

  // 256 possible pixels: a table makes every value exactly (p / 255 - mean) / stddev.
  std::array<float, 256> value;
  for (int p = 0; p < 256; ++p)
    value[p] = (float(p) / 255.f - normalization.mean) / normalization.stddev;

  const Shape& s = images.shape();
  Tensor x(DType::float32, Shape{s[0], 1, s[1], s[2]});
  const uint8_t* in = images.data<uint8_t>();
  float* out = x.data<float>();
  for (int64_t i = 0, n = images.num_elements(); i < n; ++i) out[i] = value[in[i]];

  Tensor y(DType::int32, Shape{labels.shape()[0]});
  const uint8_t* l = labels.data<uint8_t>();
  int32_t* yl = y.data<int32_t>();
  for (int64_t i = 0, n = labels.num_elements(); i < n; ++i) yl[i] = l[i];
  return Dataset(std::move(x), std::move(y));
}

Dataset Dataset::from_idx(const std::string& images_path, const std::string& labels_path,
                          Normalization normalization) {
  return from_images(read_idx(images_path, labels_path), normalization);
}

std::vector<int64_t> permutation(int64_t count, uint64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<std::size_t>(count));
  std::iota(order.begin(), order.end(), int64_t(0));
  uint64_t mix = uint64_t(epoch);
  uint64_t state = seed ^ splitmix64(mix);
  for (std::size_t i = order.size(); i > 1; --i)
    std::swap(order[i - 1], order[uniform_below(state, i)]);
  return order;
}

std::vector<int64_t> Dataset::shuffle(uint64_t seed, int64_t epoch) const {
  return permutation(size(), seed, epoch);
}

Batches Dataset::batches(int64_t batch_size, Order order, Remainder remainder) const {
  TROUPE_CHECK_ARG(batch_size >= 1, "Dataset: batch size must be at least 1, got {}", batch_size);
  TROUPE_CHECK_ARG(remainder == Remainder::keep || batch_size <= size(),
                   "Dataset: batch size {} is larger than the {} examples, and dropping the "
                   "remainder would leave no batch",
                   batch_size, size());
  int64_t count =
      remainder == Remainder::drop ? size() / batch_size : (size() + batch_size - 1) / batch_size;
  std::shared_ptr<const std::vector<int64_t>> permutation;
  if (order.shuffle)
    permutation = std::make_shared<const std::vector<int64_t>>(shuffle(order.seed, order.epoch));
  return Batches(images_, labels_, std::move(permutation), batch_size, count);
}

Batches::Batches(Tensor images, Tensor labels, std::shared_ptr<const std::vector<int64_t>> order,
                 int64_t batch_size, int64_t count)
    : images_(std::move(images)),
      labels_(std::move(labels)),
      order_(std::move(order)),
      batch_size_(batch_size),
      count_(count) {}

Batch Batches::operator[](int64_t i) const {
  TROUPE_CHECK_ARG(0 <= i && i < count_, "Batches: batch {} out of range [0, {})", i, count_);
  const int64_t begin = i * batch_size_;
  const int64_t end = std::min(begin + batch_size_, labels_.num_elements());

  bool contiguous = true;
  if (order_)
    for (int64_t k = begin + 1; k < end && contiguous; ++k)
      contiguous = (*order_)[k] == (*order_)[k - 1] + 1;
  if (contiguous) {
    int64_t first = order_ ? (*order_)[begin] : begin;
    return {images_.slice(first, first + end - begin), labels_.slice(first, first + end - begin)};
  }

  Shape shape = images_.shape();
  shape.set_dim(0, end - begin);
  Batch batch{Tensor(DType::float32, shape), Tensor(DType::int32, Shape{end - begin})};
  const std::size_t row_bytes =
      std::size_t(images_.num_elements() / images_.shape()[0]) * sizeof(float);
  const auto* images = static_cast<const char*>(images_.raw_data());
  auto* out = static_cast<char*>(batch.images.raw_data());
  const int32_t* labels = labels_.data<int32_t>();
  int32_t* out_labels = batch.labels.data<int32_t>();
  for (int64_t k = begin; k < end; ++k) {
    const int64_t from = (*order_)[k];
    std::memcpy(out + std::size_t(k - begin) * row_bytes, images + std::size_t(from) * row_bytes,
                row_bytes);
    out_labels[k - begin] = labels[from];
  }
  return batch;
}

}  // namespace troupe::data
