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
Output div(const Scope& scope, Output a, Output b);
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
