#pragma once
// Faults injected on purpose, for the tests of what survives them (a parameter shard that throws
// is restarted in place: actors/state/param_shard.hpp). TROUPE_FAILPOINTS="site:key:n,..." makes
// failpoint(site, key) return true at its n-th call in this process, once; e.g.
// TROUPE_FAILPOINTS=param_shard.optimizer_step:b:5 fails the 5th optimizer step of variable 'b'.
// Unset (always, outside tests): false, after one getenv.
#include <string_view>

namespace troupe {

bool failpoint(std::string_view site, std::string_view key);

}  // namespace troupe
