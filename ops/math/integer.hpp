#pragma once
// Integer arithmetic without undefined behaviour, for the elementwise kernels.
//
// Signed overflow in add, sub, mul, neg and abs wraps around in two's complement (as
// TensorFlow's kernels do in practice): abs(INT32_MIN) is INT32_MIN. The results that cannot
// wrap into anything meaningful (x / 0, INT_MIN / -1) are refused by the kernels instead, with
// an error naming the node. Types narrower than int are promoted by C++ and converted back,
// which C++20 defines as wrapping too.
#include <limits>
#include <type_traits>

namespace troupe::integer {

template <class T>
inline constexpr bool kWidensToUnsigned = std::is_integral_v<T> && std::is_signed_v<T> && sizeof(T) >= sizeof(int);

template <class T>
T wrapping_add(T a, T b) {
  if constexpr (kWidensToUnsigned<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(U(a) + U(b)));
  } else {
    return T(a + b);
  }
}

template <class T>
T wrapping_sub(T a, T b) {
  if constexpr (kWidensToUnsigned<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(U(a) - U(b)));
  } else {
    return T(a - b);
  }
}

template <class T>
T wrapping_mul(T a, T b) {
  if constexpr (kWidensToUnsigned<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(U(a) * U(b)));
  } else {
    return T(a * b);
  }
}

template <class T>
T wrapping_neg(T x) {
  return wrapping_sub(T(0), x);
}

template <class T>
T wrapping_abs(T x) {
  if constexpr (std::is_signed_v<T>) return x < T(0) ? wrapping_neg(x) : x;
  else return x;
}

// a / b and a % b would trap (SIGFPE on x86) for the smallest value divided by -1.
template <class T>
bool division_overflows(T a, T b) {
  if constexpr (std::is_signed_v<T>) return a == std::numeric_limits<T>::lowest() && b == T(-1);
  else return false;
}

// a % b with C++'s sign (that of a); defined for the smallest value by -1 (the remainder is 0).
template <class T>
T truncated_remainder(T a, T b) {
  return division_overflows(a, b) ? T(0) : T(a % b);
}

}  // namespace troupe::integer
