#pragma once
// Iteration over the elements of a broadcast: calls f(i, ia, ib) for each output index i with
// the indices into the two operands. Inner dimension in a tight loop.
#include <array>

#include "core/shape.hpp"

namespace troupe {

template <class F>
void for_each_broadcast(const Shape& out, const Shape& a, const Shape& b, F&& f) {
  const int64_t n = out.num_elements();
  if (n == 0) return;
  const int64_t na = a.num_elements(), nb = b.num_elements();
  if (na == n && nb == n) {
    for (int64_t i = 0; i < n; ++i) f(i, i, i);
    return;
  }
  if (na == 1 && nb == n) {
    for (int64_t i = 0; i < n; ++i) f(i, int64_t(0), i);
    return;
  }
  if (nb == 1 && na == n) {
    for (int64_t i = 0; i < n; ++i) f(i, i, int64_t(0));
    return;
  }
  const int rank = out.rank();
  std::array<int64_t, Shape::kMaxRank> sa{}, sb{}, idx{};
  int64_t stride_a = 1, stride_b = 1;
  for (int d = rank - 1; d >= 0; --d) {
    int da = a.rank() - rank + d, db = b.rank() - rank + d;
    int64_t ea = da >= 0 ? a[da] : 1, eb = db >= 0 ? b[db] : 1;
    sa[d] = ea == 1 ? 0 : stride_a;
    sb[d] = eb == 1 ? 0 : stride_b;
    stride_a *= ea;
    stride_b *= eb;
  }
  const int64_t inner = out[rank - 1];
  const int64_t ia_step = sa[rank - 1], ib_step = sb[rank - 1];
  int64_t ia = 0, ib = 0;
  for (int64_t i = 0; i < n; i += inner) {
    for (int64_t k = 0; k < inner; ++k) f(i + k, ia + k * ia_step, ib + k * ib_step);
    for (int d = rank - 2; d >= 0; --d) {  // advance the odometer over the outer dimensions
      ia += sa[d];
      ib += sb[d];
      if (++idx[d] < out[d]) break;
      ia -= sa[d] * out[d];
      ib -= sb[d] * out[d];
      idx[d] = 0;
    }
  }
}

}  // namespace troupe
