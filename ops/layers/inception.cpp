#include "ops/layers/inception.hpp"

namespace troupe::layers {
namespace {

Conv2D conv(int64_t filters, int64_t kernel) {
  return Conv2D{.filters = filters, .kernel = kernel, .activation = Activation::relu};
}

}  // namespace

InceptionLayer::InceptionLayer(Inception o)
    : o_(o),
      b1_(conv(o.b1, 1)),
      b3_reduce_(conv(o.b3_reduce, 1)),
      b3_(conv(o.b3, 3)),
      b5_reduce_(conv(o.b5_reduce, 1)),
      b5_(conv(o.b5, 5)),
      pool_(MaxPool2D{.size = 3, .stride = 1, .padding = "SAME"}),
      pool_proj_(conv(o.pool_proj, 1)),
      concat_(Concatenate{.axis = 1}) {
  b1_.set_name("1x1");
  b3_reduce_.set_name("3x3_reduce");
  b3_.set_name("3x3");
  b5_reduce_.set_name("5x5_reduce");
  b5_.set_name("5x5");
  pool_.set_name("pool");
  pool_proj_.set_name("pool_proj");
  concat_.set_name("concat");
}

Output InceptionLayer::build(Context& ctx, Output x) {
  TROUPE_CHECK_ARG(o_.b1 > 0 && o_.b3_reduce > 0 && o_.b3 > 0 && o_.b5_reduce > 0 && o_.b5 > 0 && o_.pool_proj > 0,
                   "Inception needs every branch's filters > 0");
  return concat_(ctx, {b1_(ctx, x), b3_(ctx, b3_reduce_(ctx, x)), b5_(ctx, b5_reduce_(ctx, x)),
                       pool_proj_(ctx, pool_(ctx, x))});
}

}  // namespace troupe::layers
