#pragma once
// What /proc/self/smaps says of the mapping that holds an address (the huge-page tests).
#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace troupe::testing {

// The value of `field` (in kB: "AnonHugePages", "Rss") of the mapping that holds `address`;
// -1 when no mapping does or it has no such field.
inline long smaps_kib(const void* address, const std::string& field) {
  const auto a = reinterpret_cast<std::uintptr_t>(address);
  std::ifstream smaps("/proc/self/smaps");
  bool inside = false;
  for (std::string line; std::getline(smaps, line);) {
    std::uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (line.find(':') == std::string::npos || line.find(' ') < line.find(':')) {  // a mapping's first line
      if (head >> std::hex >> lo >> dash >> hi && dash == '-') inside = lo <= a && a < hi;
      continue;
    }
    if (inside && line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  }
  return -1;
}

}  // namespace troupe::testing
