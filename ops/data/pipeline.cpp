#include "ops/data/pipeline.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <mutex>
#include <random>
#include <string_view>
#include <thread>
#include <type_traits>

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

// The rows of a CSV file, one line at a time, each parsed into the components its options name.
class CsvRows {
 public:
  CsvRows(const std::string& path, const CsvOptions& options) : path_(path), options_(options) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec)) fail(ErrorCode::not_found, "CSV file '{}' is a directory", path);
    errno = 0;
    in_.open(path);
    if (!in_)
      fail(ErrorCode::not_found, "cannot open CSV file '{}': {}", path,
           errno != 0 ? std::strerror(errno) : "no such file or no permission");
    for (auto& c : options_.components) columns_ = std::max(columns_, c.first + c.count);
    if (options_.header) next_line();
  }

  std::optional<Element> next() {
    if (!next_line()) return std::nullopt;
    split();
    Element e;
    e.reserve(options_.components.size());
    for (auto& c : options_.components) {
      Tensor t(c.dtype, c.count == 1 ? Shape{} : Shape{c.count});
      switch (c.dtype) {
        case DType::float32: fill<float>(t, c); break;
        case DType::float64: fill<double>(t, c); break;
        case DType::int32: fill<int32_t>(t, c); break;
        case DType::int64: fill<int64_t>(t, c); break;
        case DType::uint8: fill<uint8_t>(t, c); break;
        default: fail(ErrorCode::internal, "CSV file '{}': no reader for {}", path_, name_of(c.dtype));
      }
      e.push_back(std::move(t));
    }
    return e;
  }

  // Passes over rows without parsing them, as from_idx skips its examples' bytes.
  int64_t skip(int64_t count) {
    int64_t skipped = 0;
    while (skipped < count && next_line()) ++skipped;
    return skipped;
  }

 private:
  // The next line that is not blank into line_, false at the end; line_number_ counts every
  // line read, blank ones too, so that errors name the line an editor shows.
  bool next_line() {
    while (std::getline(in_, line_)) {
      ++line_number_;
      if (!line_.empty() && line_.back() == '\r') line_.pop_back();
      if (line_.find_first_not_of(" \t") != std::string::npos) return true;
    }
    if (in_.bad()) fail(ErrorCode::data_loss, "CSV file '{}' cannot be read after line {}", path_, line_number_);
    return false;
  }

  // The line's fields, as far as the last column a component names (the rest are not read).
  void split() {
    fields_.clear();
    std::string_view rest = line_;
    while (int64_t(fields_.size()) < columns_) {
      const auto at = rest.find(options_.delimiter);
      fields_.push_back(rest.substr(0, at));
      if (at == std::string_view::npos) break;
      rest.remove_prefix(at + 1);
    }
  }

  template <class T>
  void fill(Tensor& t, const CsvColumns& c) {
    T* out = t.data<T>();
    for (int64_t i = 0; i < c.count; ++i) out[i] = parse<T>(c.first + i, c.scale);
  }

  template <class T>
  T parse(int64_t column, double scale) {
    if (column >= int64_t(fields_.size()))
      fail(ErrorCode::data_loss, "CSV file '{}', line {}, column {}: the row ends after {} fields", path_, line_number_,
           column, fields_.size());
    std::string_view field = fields_[std::size_t(column)];
    while (!field.empty() && (field.front() == ' ' || field.front() == '\t')) field.remove_prefix(1);
    while (!field.empty() && (field.back() == ' ' || field.back() == '\t')) field.remove_suffix(1);
    const char* end = field.data() + field.size();
    const DType dtype = dtype_v<T>;
    auto refuse = [&](const char* why) {
      fail(ErrorCode::data_loss, "CSV file '{}', line {}, column {}: '{}' {} {}", path_, line_number_, column, field,
           why, name_of(dtype));
    };
    if constexpr (std::is_floating_point_v<T>) {
      double v = 0;
      auto [ptr, ec] = std::from_chars(field.data(), end, v);
      if (field.empty() || ec == std::errc::invalid_argument || ptr != end) refuse("is not a number of type");
      v *= scale;
      if (ec == std::errc::result_out_of_range || (std::isfinite(v) && !std::isfinite(T(v))))
        refuse("is out of range for");
      return T(v);
    } else {
      int64_t v = 0;
      auto [ptr, ec] = std::from_chars(field.data(), end, v);
      if (field.empty() || ec == std::errc::invalid_argument || ptr != end) refuse("is not a number of type");
      if (ec == std::errc::result_out_of_range || v < int64_t(std::numeric_limits<T>::min()) ||
          v > int64_t(std::numeric_limits<T>::max()))
        refuse("is out of range for");
      return T(v);
    }
  }

  std::string path_;
  CsvOptions options_;
  std::ifstream in_;
  std::string line_;
  int64_t line_number_ = 0;
  int64_t columns_ = 0;  // the columns a row must have: one past the last a component names
  std::vector<std::string_view> fields_;
};

// The iterator of the stages before a prefetch, run on a thread of its own. The thread (the
// producer) reads outcomes into a buffer of at most `ahead` of them; next() (the consumer) takes
// them in order. An outcome is an element, an error or the end, so an error comes out of next()
// after the elements read before it, and the producer reads on past it as next() would have.
// Each wait ends when the other side acts: the producer's when there is room or it is stopped,
// the consumer's when an outcome arrives, which the producer always delivers until it stops.
class PrefetchIterator final : public Iterator {
 public:
  PrefetchIterator(std::unique_ptr<Iterator> in, int64_t ahead) : in_(std::move(in)), ahead_(std::size_t(ahead)) {}

  // Stops the producer: it sees stop_ when waiting for room or after the element it is reading.
  ~PrefetchIterator() override {
    if (!producer_.joinable()) return;
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    room_.notify_one();
    producer_.join();
  }

  std::optional<Element> next() override {
    if (!producer_.joinable()) producer_ = std::thread([this] { produce(); });
    Outcome out;
    {
      std::unique_lock lock(mutex_);
      arrived_.wait(lock, [this] { return !outcomes_.empty(); });
      if (outcomes_.front().end()) return std::nullopt;  // stays: every next() past the end ends
      out = std::move(outcomes_.front());
      outcomes_.pop_front();
    }
    room_.notify_one();
    if (out.error) std::rethrow_exception(out.error);
    return std::move(out.element);
  }

  // Before the first next() nothing is read ahead and in_ is the consumer's: its own skip reads
  // no more than it must (runs no map). After, in_ is the producer's: skipping takes what next()
  // would.
  int64_t skip(int64_t count) override {
    if (!producer_.joinable()) return in_->skip(count);
    return Iterator::skip(count);
  }

 private:
  struct Outcome {
    std::optional<Element> element;
    std::exception_ptr error;
    bool end() const { return !element && !error; }
  };

  void produce() {
    for (;;) {
      {
        std::unique_lock lock(mutex_);
        room_.wait(lock, [this] { return stop_ || outcomes_.size() < ahead_; });
        if (stop_) return;
      }
      Outcome out;
      try {
        out.element = in_->next();
      } catch (...) {
        out.error = std::current_exception();
      }
      const bool end = out.end();
      {
        std::lock_guard lock(mutex_);
        outcomes_.push_back(std::move(out));
      }
      arrived_.notify_one();
      if (end) return;
    }
  }

  std::unique_ptr<Iterator> in_;
  const std::size_t ahead_;
  std::mutex mutex_;
  std::condition_variable room_;     // the producer waits on it for room or stop_
  std::condition_variable arrived_;  // the consumer waits on it for an outcome
  std::deque<Outcome> outcomes_;     // guarded by mutex_, at most ahead_ of them
  bool stop_ = false;                // guarded by mutex_
  std::thread producer_;             // started by the first next()
};

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

Pipeline Pipeline::from_csv(std::string path, CsvOptions options) {
  TROUPE_CHECK_ARG(!options.components.empty(), "from_csv '{}': the options name no component", path);
  for (std::size_t i = 0; i < options.components.size(); ++i) {
    const CsvColumns& c = options.components[i];
    TROUPE_CHECK_ARG(c.first >= 0 && c.count >= 1,
                     "from_csv '{}': component {} needs a first column >= 0 and a count >= 1, got {} and {}", path, i,
                     c.first, c.count);
    TROUPE_CHECK_ARG(c.dtype == DType::float32 || c.dtype == DType::float64 || c.dtype == DType::int32 ||
                         c.dtype == DType::int64 || c.dtype == DType::uint8,
                     "from_csv '{}': component {} is {}; a column reads as float32, float64, int32, int64 or uint8",
                     path, i, name_of(c.dtype));
    TROUPE_CHECK_ARG(c.scale == 1.0 || is_floating(c.dtype),
                     "from_csv '{}': component {} is {}, which is not scaled (by {})", path, i, name_of(c.dtype),
                     c.scale);
  }
  TROUPE_CHECK_ARG(options.delimiter != '\n' && options.delimiter != '\r',
                   "from_csv '{}': a line break cannot delimit fields", path);
  return Pipeline([path, options](int64_t) {
    auto rows = std::make_shared<CsvRows>(path, options);
    return iterator([rows] { return rows->next(); }, [rows](int64_t count) { return rows->skip(count); });
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

Pipeline Pipeline::prefetch(int64_t n) const {
  TROUPE_CHECK_ARG(n >= 1, "prefetch: it must read at least one element ahead, got {}", n);
  Source up = source_;
  return Pipeline(
      [up, n](int64_t epoch) -> std::unique_ptr<Iterator> { return std::make_unique<PrefetchIterator>(up(epoch), n); });
}

}  // namespace troupe::data
