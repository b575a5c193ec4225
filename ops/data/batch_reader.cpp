#include "ops/data/batch_reader.hpp"

#include <optional>

#include "ops/data/dataset.hpp"
#include "ops/kernel.hpp"

namespace troupe {
namespace {

TROUPE_REGISTER_OP(OpDef{
    .name = "DatasetBatches",
    .num_outputs = 2,
    .stateful = true,
    .shape_fn = [](InferenceContext& c) {
      if (c.attr<int64_t>("batch_size") < 1) c.error("batch_size must be at least 1, got {}", c.attr<int64_t>("batch_size"));
      int64_t b = c.attr<bool>("drop_remainder") ? c.attr<int64_t>("batch_size") : -1;
      c.set_output(0, DType::float32, PartialShape{b, 1, c.attr<int64_t>("height"), c.attr<int64_t>("width")});
      c.set_output(1, DType::int32, PartialShape{b});
    },
    .required_attrs = {"images_path", "labels_path", "batch_size", "shuffle_seed", "drop_remainder",
                       "height", "width"}});

class DatasetBatchesKernel final : public OpKernel {
 public:
  explicit DatasetBatchesKernel(const Node& n)
      : dataset_(data::Dataset::from_idx(get_attr<std::string>(n.attrs, "images_path", n.name),
                                         get_attr<std::string>(n.attrs, "labels_path", n.name))),
        batch_size_(get_attr<int64_t>(n.attrs, "batch_size", n.name)),
        seed_(uint64_t(get_attr<int64_t>(n.attrs, "shuffle_seed", n.name))),
        remainder_(get_attr<bool>(n.attrs, "drop_remainder", n.name) ? data::Remainder::drop
                                                                       : data::Remainder::keep) {
    const Shape& s = dataset_.images().shape();
    int64_t h = get_attr<int64_t>(n.attrs, "height", n.name), w = get_attr<int64_t>(n.attrs, "width", n.name);
    if (s[2] != h || s[3] != w)
      fail(ErrorCode::invalid_argument, "'{}' holds {}x{} images, the graph expects {}x{}",
           get_attr<std::string>(n.attrs, "images_path", n.name), s[2], s[3], h, w);
  }

  void compute(KernelContext& ctx) override {
    if (!epoch_ || next_ == epoch_->size()) {
      auto order = seed_ ? data::Order::shuffled(seed_, epoch_number_) : data::Order::sequential();
      epoch_.emplace(dataset_.batches(batch_size_, order, remainder_));
      ++epoch_number_;
      next_ = 0;
    }
    data::Batch b = (*epoch_)[next_++];
    ctx.set_output(0, b.images);
    ctx.set_output(1, b.labels);
  }

 private:
  data::Dataset dataset_;
  int64_t batch_size_;
  uint64_t seed_;
  data::Remainder remainder_;
  std::optional<data::Batches> epoch_;
  int64_t epoch_number_ = 0;
  int64_t next_ = 0;
};
TROUPE_REGISTER_KERNEL("DatasetBatches", DeviceType::cpu, DatasetBatchesKernel);

}  // namespace

std::vector<Output> ops::dataset_batches(const Scope& scope, const DatasetBatchesOptions& o) {
  Node& n = scope.add("DatasetBatches", {},
                      {{"images_path", o.images_path},
                       {"labels_path", o.labels_path},
                       {"batch_size", o.batch_size},
                       {"shuffle_seed", o.shuffle_seed},
                       {"drop_remainder", o.drop_remainder},
                       {"height", o.height},
                       {"width", o.width}});
  return {Output(&n, 0), Output(&n, 1)};
}

}  // namespace troupe
