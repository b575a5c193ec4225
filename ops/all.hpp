#pragma once
// Every op builder of Troupe.
#include "ops/array/array.hpp"
#include "ops/array/shape_like.hpp"
#include "graph/gradients.hpp"
#include "ops/basic.hpp"
#include "ops/math/elementwise.hpp"
#include "ops/math/matmul.hpp"
#include "ops/math/reduce.hpp"
#include "ops/nn/activation.hpp"
#include "ops/nn/bias_add.hpp"
#include "ops/nn/softmax.hpp"
#include "ops/random.hpp"
#include "ops/state/variable.hpp"
