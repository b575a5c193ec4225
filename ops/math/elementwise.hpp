#pragma once
// Elementwise math: unary ops, and binary ops with numpy broadcasting.
#include "graph/scope.hpp"

namespace troupe::ops {

Output neg(const Scope& scope, Output x);
Output abs(const Scope& scope, Output x);
Output exp(const Scope& scope, Output x);
Output log(const Scope& scope, Output x);
Output sqrt(const Scope& scope, Output x);
Output square(const Scope& scope, Output x);
Output reciprocal(const Scope& scope, Output x);

Output add(const Scope& scope, Output a, Output b);
Output sub(const Scope& scope, Output a, Output b);
Output mul(const Scope& scope, Output a, Output b);
// Integers: div and truncate_div round the quotient toward zero (-7 / 2 == -3), floor_div
// toward negative infinity (-7 // 2 == -4); truncate_mod's remainder has the sign of a
// (-7 % 2 == -1), floor_mod's the sign of b (== 1). Floats: div is IEEE division,
// truncate_div / floor_div round a / b, truncate_mod is std::fmod and floor_mod its shift
// to b's sign. A zero integer divisor, and the smallest int32/int64 divided by -1, fail the
// step naming the node.
Output div(const Scope& scope, Output a, Output b);
Output truncate_div(const Scope& scope, Output a, Output b);
Output floor_div(const Scope& scope, Output a, Output b);
Output truncate_mod(const Scope& scope, Output a, Output b);
Output floor_mod(const Scope& scope, Output a, Output b);
Output pow(const Scope& scope, Output a, Output b);
Output maximum(const Scope& scope, Output a, Output b);
Output minimum(const Scope& scope, Output a, Output b);

Output equal(const Scope& scope, Output a, Output b);
Output not_equal(const Scope& scope, Output a, Output b);
Output less(const Scope& scope, Output a, Output b);
Output less_equal(const Scope& scope, Output a, Output b);
Output greater(const Scope& scope, Output a, Output b);
Output greater_equal(const Scope& scope, Output a, Output b);

}  // namespace troupe::ops
