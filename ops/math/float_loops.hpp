#pragma once
// The elementwise kernels' float32 loops, compiled for x86-64-v3 (AVX2 with FMA) besides the
// baseline (SSE2), the one the CPU has chosen at load time (GCC's target_clones). Compiled for
// the baseline alone, a loop stores 16 bytes an instruction, the AVX2 clone 32
// (docs/performance.md, "Measured settings and kernels"). The baseline also keeps a ?: on floats
// (Relu, Maximum) as a branch, which stops vectorization; AVX has the blend. F::f is the op's
// scalar function, the same one the other dtypes use, and no fast-math: the clones give the
// baseline's results, except that where F::f multiplies and then adds (the gradient of tanh,
// g (1 - y y)) the AVX2 clone may fuse the two into one FMA, one rounding fewer.
#include <cstdint>

// A function compiled for each of the x86-64 levels named, the CPU's choice made at load time
// (GCC's target_clones: an IFUNC the loader resolves). A ThreadSanitizer build
// (-DTROUPE_SANITIZE=thread, which defines TROUPE_NO_CLONES) compiles it once, for the
// baseline: the loader runs the resolvers before TSan's runtime is up, and every test binary
// would crash before main.
#if defined(TROUPE_NO_CLONES)
#define TROUPE_CLONES(...)
#else
#define TROUPE_CLONES(...) [[gnu::target_clones(__VA_ARGS__)]]
#endif

namespace troupe::float_loops {

// Below this many elements a kernel keeps its inline loop: the clones are reached through an
// indirect call, which a scalar (the executor's graphs of scalar adds, a loop's counter) would
// pay for nothing.
inline constexpr int64_t kMinElements = 64;

// y[i] = F::f(x[i]) for i < n.
template <class F>
TROUPE_CLONES("arch=x86-64-v3", "default")
void unary(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = F::f(x[i]);
}

// y[i] = F::f(y[i]) for i < n: over a forwarded input (KernelContext::forward_or_allocate_output),
// where unary()'s two restrict pointers would be the same.
template <class F>
TROUPE_CLONES("arch=x86-64-v3", "default")
void unary_in_place(float* y, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] = F::f(y[i]);
}

// out[i] = F::f(a[i], b[i]) for i < n, where an operand with one element (a_single,
// b_single) stands for every i (a broadcast scalar).
template <class F>
TROUPE_CLONES("arch=x86-64-v3", "default")
void binary(const float* __restrict__ a, bool a_single, const float* __restrict__ b, bool b_single,
            float* __restrict__ out, int64_t n) {
  if (a_single) {
    const float s = a[0];
    for (int64_t i = 0; i < n; ++i) out[i] = F::f(s, b[i]);
  } else if (b_single) {
    const float s = b[0];
    for (int64_t i = 0; i < n; ++i) out[i] = F::f(a[i], s);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = F::f(a[i], b[i]);
  }
}

// binary() with out over a forwarded operand: a (a_is_out) or b; the other operand may be a
// single element, as in binary().
template <class F>
TROUPE_CLONES("arch=x86-64-v3", "default")
void binary_in_place(float* out, bool a_is_out, const float* __restrict__ other, bool other_single, int64_t n) {
  if (other_single) {
    const float s = other[0];
    if (a_is_out) {
      for (int64_t i = 0; i < n; ++i) out[i] = F::f(out[i], s);
    } else {
      for (int64_t i = 0; i < n; ++i) out[i] = F::f(s, out[i]);
    }
  } else if (a_is_out) {
    for (int64_t i = 0; i < n; ++i) out[i] = F::f(out[i], other[i]);
  } else {
    for (int64_t i = 0; i < n; ++i) out[i] = F::f(other[i], out[i]);
  }
}

// The kernels' entry points: y may be x (a forwarded input,
// KernelContext::forward_or_allocate_output), out may be a or b; each picks the loop for it.
template <class F>
inline void unary_into(const float* x, float* y, int64_t n) {
  if (y == x) return unary_in_place<F>(y, n);
  unary<F>(x, y, n);
}
template <class F>
inline void binary_into(const float* a, bool a_single, const float* b, bool b_single, float* out, int64_t n) {
  if (out == a) return binary_in_place<F>(out, true, b, b_single, n);
  if (out == b) return binary_in_place<F>(out, false, a, a_single, n);
  binary<F>(a, a_single, b, b_single, out, n);
}

}  // namespace troupe::float_loops
