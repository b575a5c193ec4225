#pragma once
// MaxPool and AvgPool over NCHW (AvgPool leaves padding out of the average), with gradients,
// through oneDNN 2.x.
#include <string>
#include <vector>

#include "graph/scope.hpp"

namespace troupe::ops {

struct PoolOptions {
  std::vector<int64_t> ksize = {2, 2};
  std::vector<int64_t> strides = {2, 2};
  std::string padding = "VALID";  // "SAME" or "VALID"
};

Output max_pool(const Scope& scope, Output input, PoolOptions options = {});
Output avg_pool(const Scope& scope, Output input, PoolOptions options = {});

}  // namespace troupe::ops
