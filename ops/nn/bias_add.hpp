#pragma once
// BiasAdd: adds a bias [C] along the channel axis of x: axis 1 for "NCHW" (also [N,C]), the
// last axis for "NHWC".
#include <string>

#include "graph/scope.hpp"

namespace troupe::ops {

Output bias_add(const Scope& scope, Output x, Output bias, const std::string& data_format = "NCHW");

}  // namespace troupe::ops
