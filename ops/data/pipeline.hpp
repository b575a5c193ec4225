#pragma once
// Pipeline: an input pipeline in the spirit of tf.data, run on the worker's side. A pipeline
// is a recipe; begin() runs it, yielding elements (tuples of tensors) one at a time:
//
//   auto files = data::fashion_mnist_files(data::kFashionMnistDir, data::Split::train);
//   auto batches = data::Pipeline::from_idx(files.first, files.second)  // {float32 [1,28,28], int32 []}
//                      .shard(workers, my_index)
//                      .shuffle(10000, seed)
//                      .map(augment)
//                      .batch(64)
//                      .repeat(epochs);
//
// from_idx reads its files anew each epoch, one example at a time. shuffle(buffer, seed) draws
// each element at random from a buffer of the next `buffer` elements, reseeded per epoch (seed,
// epoch), so each epoch has its own order and runs repeat it. When a whole pass fits in the
// buffer, its order is data::permutation(count, seed, epoch) (ops/data/dataset.hpp): a uniform
// reshuffle each epoch, the order of Dataset's Order::shuffled(seed, epoch). batch stacks
// elements along a new first dimension; the last, smaller, batch is kept unless
// drop_remainder. prefetch(n) runs the stages before it on a thread of its own, at most n
// elements ahead of whatever consumes the iterator (a loop that feeds each batch to a step); a
// Prefetcher (actors/prefetch.hpp) runs a pipeline on its own thread into a queue that the graph
// dequeues from. Either way reading overlaps the training steps.
// Errors (a bad file, elements that cannot be stacked, a map that throws) come out of next().
//
// A run can start part-way, at the elements a run from the start would yield from there on:
// begin({.epoch = e, .elements = n}) starts at pass e (repeat counts its passes from e) and
// skips the first n elements of it. Skipping reads what it must (a shuffle draws from its
// buffer as before) but neither stacks skipped batches nor runs a map on skipped elements.
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor.hpp"

namespace troupe::data {

using Element = std::vector<Tensor>;

// One component of a CSV row: `count` columns from column `first` (columns count from 0), each
// read as `dtype` (float32, float64, int32, int64 or uint8) and, for a floating dtype,
// multiplied by `scale`. One column gives a scalar; more give a rank-1 tensor of `count`.
struct CsvColumns {
  int64_t first = 0;
  int64_t count = 1;
  DType dtype = DType::float32;
  double scale = 1.0;
};

// How from_csv reads a file. Its rows hold numbers only: no quoted fields, one delimiter between
// fields, spaces around a field ignored; blank lines and columns no component names are skipped.
struct CsvOptions {
  std::vector<CsvColumns> components;  // an element's tensors, in this order
  bool header = false;                 // the first line names the columns: skipped
  char delimiter = ',';
};

class Iterator {
 public:
  virtual ~Iterator() = default;
  virtual std::optional<Element> next() = 0;  // nullopt: the end
  // Passes over the next `count` elements as next() would; returns how many there were (fewer
  // at the end). This default calls next(); the pipeline's iterators skip more cheaply.
  virtual int64_t skip(int64_t count);
};

// Where a run starts: pass `epoch` (from 0), after its first `elements` elements.
struct Position {
  int64_t epoch = 0;
  int64_t elements = 0;
};

class Pipeline {
 public:
  // Makes the iterator of one pass over the data; `epoch` counts the passes from 0.
  using Source = std::function<std::unique_ptr<Iterator>(int64_t epoch)>;
  explicit Pipeline(Source source) : source_(std::move(source)) {}

  // The rows of the components (which share their first dimension), one element per row.
  static Pipeline from_tensors(std::vector<Tensor> components);
  // The examples of an IDX images/labels pair (ops/data/idx.hpp): {float32 [1, rows, cols]
  // scaled to [0, 1], int32 label}, read from the files as the pipeline runs.
  static Pipeline from_idx(std::string images_path, std::string labels_path);
  // The rows of a CSV file of numbers, read anew each pass, one element per row: e.g. a
  // Fashion-MNIST row, its 784 pixels and then its label, with
  //   {.components = {{.first = 0, .count = 784, .scale = 1.0 / 255}, {.first = 784, .dtype = DType::int32}}}
  // gives {float32 [784], int32 []}. A file that cannot be opened is not_found (from begin());
  // a field that is not a number of its dtype (or is out of its range), or a row without a
  // column a component names, is data_loss naming the file, the line (from 1) and the column
  // (from 0).
  static Pipeline from_csv(std::string path, CsvOptions options);

  Pipeline shard(int64_t num_shards, int64_t index) const;  // every num_shards-th, from index
  Pipeline shuffle(int64_t buffer, uint64_t seed) const;
  Pipeline map(std::function<Element(Element)> fn) const;
  Pipeline batch(int64_t size, bool drop_remainder = false) const;
  Pipeline repeat(int64_t epochs) const;  // -1: forever
  // The same elements, read by the stages before it on a thread of its own, at most n (>= 1)
  // ahead of next(). Their errors come out of next() where they occur, after the elements before
  // them, and the elements after follow. Skipping before the first next() is the stages' own
  // skip; after, it takes what next() would. The thread starts at the first next(); destroying
  // the iterator stops it once the element it is reading is read.
  Pipeline prefetch(int64_t n) const;

  std::unique_ptr<Iterator> begin() const { return source_(0); }
  // Starts at `from`; refuses (out_of_range) a pass with fewer than from.elements elements.
  std::unique_ptr<Iterator> begin(Position from) const;

 private:
  Source source_;
};

}  // namespace troupe::data
