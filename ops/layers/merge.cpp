#include "ops/layers/merge.hpp"

#include "ops/all.hpp"

namespace troupe::layers {
namespace {

// Two dimensions that may still be unknown (-1) are compatible unless both are known and differ.
bool compatible(int64_t a, int64_t b) { return a < 0 || b < 0 || a == b; }

std::string shapes_of(const std::vector<Output>& inputs) {
  std::string out;
  for (auto& x : inputs) out += (out.empty() ? "" : ", ") + x.shape().to_string();
  return out;
}

}  // namespace

Output AddLayer::build_many(Context& ctx, const std::vector<Output>& inputs) {
  TROUPE_CHECK_ARG(inputs.size() >= 2, "Add needs at least 2 inputs, got {}", inputs.size());
  auto& first = inputs[0].shape();
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    auto& in = inputs[i].shape();
    bool same = !first.rank_known() || !in.rank_known() || first.rank() == in.rank();
    for (int d = 0; same && first.rank_known() && in.rank_known() && d < in.rank(); ++d)
      same = compatible(first.dim(d), in.dim(d));
    TROUPE_CHECK_ARG(same, "Add needs inputs of one shape, got {} (input {} differs from input 0)",
                     shapes_of(inputs), i);
  }
  Output y = inputs[0];
  for (std::size_t i = 1; i < inputs.size(); ++i) y = ops::add(ctx.scope(), y, inputs[i]);
  return y;
}

Output ConcatenateLayer::build_many(Context& ctx, const std::vector<Output>& inputs) {
  TROUPE_CHECK_ARG(inputs.size() >= 2, "Concatenate needs at least 2 inputs, got {}", inputs.size());
  auto& first = inputs[0].shape();
  TROUPE_CHECK_ARG(first.rank_known(), "Concatenate needs inputs of known rank, got {}", shapes_of(inputs));
  const int64_t rank = first.rank();
  const int64_t axis = o_.axis < 0 ? o_.axis + rank : o_.axis;
  TROUPE_CHECK_ARG(axis >= 0 && axis < rank, "Concatenate's axis {} is out of range for inputs of rank {}", o_.axis,
                   rank);
  for (std::size_t i = 1; i < inputs.size(); ++i) {
    auto& in = inputs[i].shape();
    bool fits = in.rank_known() && in.rank() == rank;
    for (int d = 0; fits && d < rank; ++d) fits = d == axis || compatible(first.dim(d), in.dim(d));
    TROUPE_CHECK_ARG(fits, "Concatenate along axis {} needs inputs that agree on every other axis, got {} (input {} "
                     "differs from input 0)", axis, shapes_of(inputs), i);
  }
  return ops::concat(ctx.scope(), inputs, axis);
}

}  // namespace troupe::layers
