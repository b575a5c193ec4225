#include "ops/data/pipeline.hpp"

#include <cstring>
#include <random>

#include "ops/data/dataset.hpp"
#include "ops/data/idx.hpp"
#include "ops/data/queue.hpp"

namespace troupe::data {
namespace {

using NextFn = std::function<std::optional<Element>()>;
using SkipFn = std::function<int64_t(int64_t)>;

// An iterator from a next function and, where skipping can be cheaper than next(), a skip one.
class FnIterator final : public Iterator {
 public:
  FnIterator(NextFn next, SkipFn skip) : next_(std::move(next)), skip_(std::move(skip)) {}
  std::optional<Element> next() override { return next_(); }
  int64_t skip(int64_t count) override { return skip_ ? skip_(count) : Iterator::skip(count); }

 private:
  NextFn next_;
  SkipFn skip_;
};

std::unique_ptr<Iterator> iterator(NextFn next, SkipFn skip = nullptr) {
  return std::make_unique<FnIterator>(std::move(next), std::move(skip));
}

}  // namespace

int64_t Iterator::skip(int64_t count) {
  int64_t skipped = 0;
  while (skipped < count && next()) ++skipped;
  return skipped;
}

std::unique_ptr<Iterator> Pipeline::begin(Position from) const {
  TROUPE_CHECK_ARG(from.epoch >= 0 && from.elements >= 0,
                   "Pipeline::begin: the epoch and the elements to skip must not be negative, got {} and {}",
                   from.epoch, from.elements);
  auto it = source_(from.epoch);
  if (int64_t skipped = it->skip(from.elements); skipped < from.elements)
    fail(ErrorCode::out_of_range, "Pipeline::begin: epoch {} ends after {} elements, before the {} to skip", from.epoch,
         skipped, from.elements);
  return it;
}

Pipeline Pipeline::from_tensors(std::vector<Tensor> components) {
  TROUPE_CHECK_ARG(!components.empty(), "from_tensors needs at least one component");
  for (auto& c : components)
    TROUPE_CHECK_ARG(c.shape().rank() >= 1 && c.shape()[0] == components[0].shape()[0],
                     "from_tensors: the components must share a first dimension, got {} and {}",
                     components[0].describe(), c.describe());
  return Pipeline([components](int64_t) {
    QueueSpec spec;
    for (auto& c : components) spec.types.push_back(c.dtype());
    auto split = std::make_shared<std::vector<Element>>(queue_elements::split(spec, components));
    auto at = std::make_shared<std::size_t>(0);
    return iterator(
        [split, at]() -> std::optional<Element> {
          if (*at == split->size()) return std::nullopt;
          return (*split)[(*at)++];
        },
        [split, at](int64_t count) {
          auto n = std::min(std::size_t(count), split->size() - *at);
          *at += n;
          return int64_t(n);
        });
  });
}

Pipeline Pipeline::from_idx(std::string images_path, std::string labels_path) {
  return Pipeline([images_path, labels_path](int64_t) {
    auto files = std::make_shared<IdxExamples>(images_path, labels_path);
    auto pixels = std::make_shared<std::vector<uint8_t>>(std::size_t(files->rows() * files->cols()));
    return iterator(
        [files, pixels]() -> std::optional<Element> {
          uint8_t label = 0;
          if (!files->next(pixels->data(), &label)) return std::nullopt;
          Tensor image(DType::float32, Shape{1, files->rows(), files->cols()});
          float* p = image.data<float>();
          for (std::size_t i = 0; i < pixels->size(); ++i) p[i] = float((*pixels)[i]) / 255.0f;
          return Element{std::move(image), Tensor::scalar<int32_t>(label)};
        },
        [files, pixels](int64_t count) {  // reads the bytes, converts nothing
          uint8_t label = 0;
          int64_t skipped = 0;
          while (skipped < count && files->next(pixels->data(), &label)) ++skipped;
          return skipped;
        });
  });
}

Pipeline Pipeline::shard(int64_t num_shards, int64_t index) const {
  TROUPE_CHECK_ARG(num_shards >= 1 && index >= 0 && index < num_shards,
                   "shard({}, {}): the index must lie in [0, num_shards)", num_shards, index);
  Source up = source_;
  return Pipeline([up, num_shards, index](int64_t epoch) {
    std::shared_ptr<Iterator> in = up(epoch);
    auto position = std::make_shared<int64_t>(0);
    return iterator(
        [in, position, num_shards, index]() -> std::optional<Element> {
          while (auto e = in->next())
            if ((*position)++ % num_shards == index) return e;
          return std::nullopt;
        },
        [in, position, num_shards, index](int64_t count) {
          int64_t skipped = 0;
          while (skipped < count) {
            if (in->skip(1) == 0) break;
            if ((*position)++ % num_shards == index) ++skipped;
          }
          return skipped;
        });
  });
}

Pipeline Pipeline::shuffle(int64_t buffer, uint64_t seed) const {
  TROUPE_CHECK_ARG(buffer >= 1, "shuffle: the buffer must hold at least one element, got {}", buffer);
  Source up = source_;
  return Pipeline([up, buffer, seed](int64_t epoch) {
    struct State {
      std::shared_ptr<Iterator> in;
      std::vector<Element> pool;
      std::mt19937_64 rng;
      bool started = false;
      std::optional<Element> pending;  // read past a full buffer while finding out the pass is longer
      std::vector<int64_t> order;      // when the whole pass fits in the buffer: the permutation
      std::size_t at = 0;              // and how far along it
    };
    auto st = std::make_shared<State>();
    st->in = up(epoch);
    st->rng.seed(seed * 1000003u + uint64_t(epoch));
    // Fills the buffer; a pass that ends within it is taken in data::permutation's order.
    auto start = [st, buffer, seed, epoch] {
      st->started = true;
      while (int64_t(st->pool.size()) < buffer) {
        auto e = st->in->next();
        if (!e) break;
        st->pool.push_back(std::move(*e));
      }
      if (int64_t(st->pool.size()) == buffer) st->pending = st->in->next();
      if (!st->pending) st->order = permutation(int64_t(st->pool.size()), seed, epoch);
    };
    // The buffer of a longer pass: draw one at random, refill its place from the input.
    auto draw = [st]() -> std::optional<Element> {
      if (st->pool.empty()) return std::nullopt;
      std::uniform_int_distribution<std::size_t> pick(0, st->pool.size() - 1);
      std::swap(st->pool[pick(st->rng)], st->pool.back());
      Element out = std::move(st->pool.back());
      st->pool.pop_back();
      if (st->pending) {
        st->pool.push_back(std::move(*st->pending));
        st->pending.reset();
      } else if (auto e = st->in->next()) {
        st->pool.push_back(std::move(*e));
      }
      return out;
    };
    auto whole_pass = [st] { return !st->order.empty() || st->pool.empty(); };
    return iterator(
        [st, start, draw, whole_pass]() -> std::optional<Element> {
          if (!st->started) start();
          if (!whole_pass()) return draw();
          if (st->at == st->order.size()) return std::nullopt;
          return std::move(st->pool[std::size_t(st->order[st->at++])]);
        },
        [st, start, draw, whole_pass](int64_t count) {
          if (!st->started) start();
          if (whole_pass()) {
            auto n = std::min(std::size_t(count), st->order.size() - st->at);
            st->at += n;
            return int64_t(n);
          }
          int64_t skipped = 0;
          while (skipped < count && draw()) ++skipped;
          return skipped;
        });
  });
}

Pipeline Pipeline::map(std::function<Element(Element)> fn) const {
  Source up = source_;
  return Pipeline([up, fn](int64_t epoch) {
    std::shared_ptr<Iterator> in = up(epoch);
    return iterator(
        [in, fn]() -> std::optional<Element> {
          auto e = in->next();
          if (!e) return std::nullopt;
          return fn(std::move(*e));
        },
        [in](int64_t count) { return in->skip(count); });
  });
}

Pipeline Pipeline::batch(int64_t size, bool drop_remainder) const {
  TROUPE_CHECK_ARG(size >= 1, "batch: the size must be positive, got {}", size);
  Source up = source_;
  return Pipeline([up, size, drop_remainder](int64_t epoch) {
    std::shared_ptr<Iterator> in = up(epoch);
    return iterator(
        [in, size, drop_remainder]() -> std::optional<Element> {
          std::vector<Element> rows;
          while (int64_t(rows.size()) < size) {
            auto e = in->next();
            if (!e) break;
            rows.push_back(std::move(*e));
          }
          if (rows.empty() || (drop_remainder && int64_t(rows.size()) < size)) return std::nullopt;
          QueueSpec spec;
          spec.name = "batch";
          for (auto& c : rows[0]) spec.types.push_back(c.dtype());
          return queue_elements::stack(spec, rows);
        },
        [in, size, drop_remainder](int64_t count) {
          const int64_t rows = in->skip(count * size);
          return drop_remainder ? rows / size : (rows + size - 1) / size;
        });
  });
}

Pipeline Pipeline::repeat(int64_t epochs) const {
  TROUPE_CHECK_ARG(epochs == -1 || epochs >= 0, "repeat: epochs must be -1 (forever) or at least 0, got {}", epochs);
  Source up = source_;
  return Pipeline([up, epochs](int64_t first) {
    auto epoch = std::make_shared<int64_t>(first);
    auto in = std::make_shared<std::unique_ptr<Iterator>>(epochs < 0 || first < epochs ? up(first) : nullptr);
    auto next_pass = [up, epochs, epoch, in] {
      ++*epoch;
      *in = epochs < 0 || *epoch < epochs ? up(*epoch) : nullptr;
    };
    return iterator(
        [in, next_pass]() -> std::optional<Element> {
          while (*in) {
            if (auto e = (*in)->next()) return e;
            next_pass();
          }
          return std::nullopt;
        },
        [in, next_pass](int64_t count) {
          int64_t skipped = 0;
          while (*in && skipped < count) {
            int64_t n = (*in)->skip(count - skipped);
            skipped += n;
            if (skipped < count) next_pass();
          }
          return skipped;
        });
  });
}

}  // namespace troupe::data
