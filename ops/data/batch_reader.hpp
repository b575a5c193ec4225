#pragma once
// DatasetBatches: the input of a training graph, read on the worker side. The op's kernel
// loads an IDX images/labels pair once, when the executable is built, and each run emits the
// next batch (images float32 [B,1,H,W] in [0,1], labels int32 [B]); after the last batch of an
// epoch it starts the next epoch, reshuffled when a seed is given. The client feeds nothing.
#include <string>
#include <vector>

#include "graph/scope.hpp"

namespace troupe::ops {

struct DatasetBatchesOptions {
  std::string images_path;
  std::string labels_path;
  int64_t batch_size = 64;
  int64_t shuffle_seed = 0;    // 0: stored order every epoch
  bool drop_remainder = false;  // false: the last batch of an epoch may be smaller
  int64_t height = 28, width = 28;  // the images' size, checked when the files are read
};

// {images, labels}.
std::vector<Output> dataset_batches(const Scope& scope, const DatasetBatchesOptions& options);

}  // namespace troupe::ops
