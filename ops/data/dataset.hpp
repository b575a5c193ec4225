#pragma once
// Dataset: labelled images held in memory for training, in the form a graph takes them:
// images float32 [N, 1, H, W] scaled to [0, 1] (then normalised, when asked, as
// (x - mean) / stddev), labels int32 [N]. It is cut into batches an epoch at a time, in stored
// order or in a permutation fixed by (seed, epoch).
//
// Ownership: a Dataset owns its two tensors; copying it shares them, as copying a Tensor does.
// Batches and the tensors of each Batch share them too, so they may outlive the Dataset. A batch
// whose examples lie contiguously in the dataset is a zero-copy slice of its buffer (read it,
// never write through it); any other batch is a gathered copy of its own.
// Thread-safety: Dataset and Batches are immutable once made; any number of threads may call
// their members at once.
//
//   auto train = data::Dataset::from_images(data::fashion_mnist(data::Split::train));
//   for (int64_t epoch = 0; epoch < epochs; ++epoch)
//     for (const data::Batch& b : train.batches(64, data::Order::shuffled(seed, epoch),
//                                               data::Remainder::keep))
//       session.run({{x, b.images}, {y, b.labels}}, {loss}, {train_op});
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/tensor.hpp"
#include "ops/data/idx.hpp"

namespace troupe::data {

// The order an epoch visits the examples in. A shuffled order depends on (seed, epoch) alone:
// the same on every run and platform, a different permutation each epoch.
struct Order {
  static Order sequential() { return Order{}; }
  static Order shuffled(uint64_t seed, int64_t epoch) { return Order{true, seed, epoch}; }
  bool shuffle = false;
  uint64_t seed = 0;
  int64_t epoch = 0;
};

// A permutation of 0..count-1 fixed by (seed, epoch) alone: a uniform Fisher-Yates shuffle
// driven by splitmix64, the same on every platform. Dataset's shuffled orders and a Pipeline
// shuffle whose buffer holds the whole pass both follow it.
std::vector<int64_t> permutation(int64_t count, uint64_t seed, int64_t epoch);

// What happens to the last size % batch_size examples: a last, smaller batch, or none.
enum class Remainder { keep, drop };

// Applied after scaling to [0, 1]; the default leaves the values in [0, 1].
struct Normalization {
  float mean = 0.f;
  float stddev = 1.f;
};

struct Batch {
  Tensor images;  // float32 [B, 1, H, W]
  Tensor labels;  // int32 [B]
};

// The batches of one epoch. Each is made when asked for, so an epoch holds one permutation
// (8 bytes an example) and no more than the batches the caller keeps.
class Batches {
 public:
  class iterator {
   public:
    using value_type = Batch;
    using difference_type = std::ptrdiff_t;
    iterator() = default;
    Batch operator*() const { return (*batches_)[index_]; }
    iterator& operator++() {
      ++index_;
      return *this;
    }
    iterator operator++(int) {
      iterator old = *this;
      ++index_;
      return old;
    }
    friend bool operator==(const iterator& a, const iterator& b) { return a.index_ == b.index_; }

   private:
    friend class Batches;
    iterator(const Batches* batches, int64_t index) : batches_(batches), index_(index) {}
    const Batches* batches_ = nullptr;
    int64_t index_ = 0;
  };

  int64_t size() const { return count_; }  // the number of batches
  int64_t batch_size() const { return batch_size_; }
  Batch operator[](int64_t i) const;  // refuses i outside [0, size())
  iterator begin() const { return {this, 0}; }
  iterator end() const { return {this, count_}; }

 private:
  friend class Dataset;
  Batches(Tensor images, Tensor labels, std::shared_ptr<const std::vector<int64_t>> order,
          int64_t batch_size, int64_t count);

  Tensor images_;
  Tensor labels_;
  std::shared_ptr<const std::vector<int64_t>> order_;  // null: stored order
  int64_t batch_size_ = 0;
  int64_t count_ = 0;
};

class Dataset {
 public:
  // From uint8 images [N, H, W] and uint8 labels [N], as the IDX readers return them.
  static Dataset from_images(const LabeledImages& data, Normalization normalization = {});
  // From an IDX images file and an IDX labels file (see idx.hpp for what is refused).
  static Dataset from_idx(const std::string& images_path, const std::string& labels_path,
                          Normalization normalization = {});

  int64_t size() const { return labels_.num_elements(); }
  const Tensor& images() const { return images_; }  // float32 [N, 1, H, W]
  const Tensor& labels() const { return labels_; }  // int32 [N]

  // A permutation of 0..size()-1 fixed by (seed, epoch); Order::shuffled batches follow it.
  std::vector<int64_t> shuffle(uint64_t seed, int64_t epoch) const;

  // One epoch in batches of batch_size. Refuses a batch_size below 1, and one larger than the
  // dataset when the remainder is dropped (no batch would be left).
  Batches batches(int64_t batch_size, Order order, Remainder remainder) const;

 private:
  Dataset(Tensor images, Tensor labels) : images_(std::move(images)), labels_(std::move(labels)) {}
  Tensor images_;
  Tensor labels_;
};

}  // namespace troupe::data
