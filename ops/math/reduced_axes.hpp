#pragma once
// Which axes a reduction reduces, for the reductions' kernels and ReductionGrad's
// (ops/array/shape_like.cpp), which spreads a reduction's gradient back over them.
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "graph/attr.hpp"

namespace troupe {

// The axes a reduction's attributes name ("axes"); nullopt for all of them ("reduce_all").
std::optional<std::vector<int64_t>> axes_of(const AttrMap& attrs, const std::string& owner);

// Which axes of a rank-`rank` tensor (at most Shape::kMaxRank) `axes` reduce, bit d for axis d
// (negative axes count from the end); throws on an axis out of range. Allocates nothing: a
// kernel asks it at every firing.
uint32_t reduced_axes(const std::optional<std::vector<int64_t>>& axes, int rank);

inline bool is_reduced(uint32_t reduced, int axis) { return (reduced >> axis) & 1; }

}  // namespace troupe
