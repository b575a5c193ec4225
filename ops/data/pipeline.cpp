#include "ops/data/pipeline.hpp"

#include <cstring>
#include <random>

#include "ops/data/idx.hpp"
#include "ops/data/queue.hpp"

namespace troupe::data {
namespace {

// An iterator from a function.
class FnIterator final : public Iterator {
 public:
  explicit FnIterator(std::function<std::optional<Element>()> fn) : fn_(std::move(fn)) {}
  std::optional<Element> next() override { return fn_(); }

 private:
  std::function<std::optional<Element>()> fn_;
};

std::unique_ptr<Iterator> iterator(std::function<std::optional<Element>()> fn) {
  return std::make_unique<FnIterator>(std::move(fn));
}

}  // namespace

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
    return iterator([split, at]() -> std::optional<Element> {
      if (*at == split->size()) return std::nullopt;
      return (*split)[(*at)++];
    });
  });
}

Pipeline Pipeline::from_idx(std::string images_path, std::string labels_path) {
  return Pipeline([images_path, labels_path](int64_t) {
    auto files = std::make_shared<IdxExamples>(images_path, labels_path);
    auto pixels = std::make_shared<std::vector<uint8_t>>(std::size_t(files->rows() * files->cols()));
    return iterator([files, pixels]() -> std::optional<Element> {
      uint8_t label = 0;
      if (!files->next(pixels->data(), &label)) return std::nullopt;
      Tensor image(DType::float32, Shape{1, files->rows(), files->cols()});
      float* p = image.data<float>();
      for (std::size_t i = 0; i < pixels->size(); ++i) p[i] = float((*pixels)[i]) / 255.0f;
      return Element{std::move(image), Tensor::scalar<int32_t>(label)};
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
    return iterator([in, position, num_shards, index]() -> std::optional<Element> {
      while (auto e = in->next())
        if ((*position)++ % num_shards == index) return e;
      return std::nullopt;
    });
  });
}

Pipeline Pipeline::shuffle(int64_t buffer, uint64_t seed) const {
  TROUPE_CHECK_ARG(buffer >= 1, "shuffle: the buffer must hold at least one element, got {}", buffer);
  Source up = source_;
  return Pipeline([up, buffer, seed](int64_t epoch) {
    std::shared_ptr<Iterator> in = up(epoch);
    auto pool = std::make_shared<std::vector<Element>>();
    auto rng = std::make_shared<std::mt19937_64>(seed * 1000003u + uint64_t(epoch));
    return iterator([in, pool, rng, buffer]() -> std::optional<Element> {
      while (int64_t(pool->size()) < buffer) {
        auto e = in->next();
        if (!e) break;
        pool->push_back(std::move(*e));
      }
      if (pool->empty()) return std::nullopt;
      std::uniform_int_distribution<std::size_t> pick(0, pool->size() - 1);
      std::swap((*pool)[pick(*rng)], pool->back());
      Element out = std::move(pool->back());
      pool->pop_back();
      return out;
    });
  });
}

Pipeline Pipeline::map(std::function<Element(Element)> fn) const {
  Source up = source_;
  return Pipeline([up, fn](int64_t epoch) {
    std::shared_ptr<Iterator> in = up(epoch);
    return iterator([in, fn]() -> std::optional<Element> {
      auto e = in->next();
      if (!e) return std::nullopt;
      return fn(std::move(*e));
    });
  });
}

Pipeline Pipeline::batch(int64_t size, bool drop_remainder) const {
  TROUPE_CHECK_ARG(size >= 1, "batch: the size must be positive, got {}", size);
  Source up = source_;
  return Pipeline([up, size, drop_remainder](int64_t epoch) {
    std::shared_ptr<Iterator> in = up(epoch);
    return iterator([in, size, drop_remainder]() -> std::optional<Element> {
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
    });
  });
}

Pipeline Pipeline::repeat(int64_t epochs) const {
  TROUPE_CHECK_ARG(epochs == -1 || epochs >= 0, "repeat: epochs must be -1 (forever) or at least 0, got {}", epochs);
  Source up = source_;
  return Pipeline([up, epochs](int64_t) {
    auto epoch = std::make_shared<int64_t>(0);
    auto in = std::make_shared<std::unique_ptr<Iterator>>(epochs == 0 ? nullptr : up(0));
    return iterator([up, epochs, epoch, in]() -> std::optional<Element> {
      while (*in) {
        if (auto e = (*in)->next()) return e;
        ++*epoch;
        *in = epochs < 0 || *epoch < epochs ? up(*epoch) : nullptr;
      }
      return std::nullopt;
    });
  });
}

}  // namespace troupe::data
