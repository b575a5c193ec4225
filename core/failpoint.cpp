#include "core/failpoint.hpp"

#include <cstdlib>
#include <map>
#include <mutex>
#include <string>

namespace troupe {

bool failpoint(std::string_view site, std::string_view key) {
  const char* spec = std::getenv("TROUPE_FAILPOINTS");
  if (!spec || !*spec) return false;
  static std::mutex mutex;
  static std::map<std::string, long> calls;  // per "site:key": the calls so far
  const std::string name = std::string(site) + ":" + std::string(key);
  std::string_view all(spec);
  while (!all.empty()) {
    const auto comma = all.find(',');
    const std::string_view item = all.substr(0, comma);
    all = comma == std::string_view::npos ? std::string_view() : all.substr(comma + 1);
    const auto colon = item.rfind(':');
    if (colon == std::string_view::npos || item.substr(0, colon) != name) continue;
    const long nth = std::strtol(std::string(item.substr(colon + 1)).c_str(), nullptr, 10);
    std::lock_guard<std::mutex> lock(mutex);
    return ++calls[name] == nth;
  }
  return false;
}

}  // namespace troupe
