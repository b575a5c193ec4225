#pragma once
// CLI11 checks for the numbers Troupe's programs take, with messages that say what is wrong:
// "--batch: 'abc' is not a number", "--steps: -3 is negative" (CLI11's own PositiveNumber says
// "Value abc not in range 0.000000 to 1797...", which names neither).
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>
#include <string>
#include <utility>

namespace troupe::cli {

namespace detail {
inline CLI::Validator number_check(bool zero_allowed) {
  return CLI::Validator(
      [zero_allowed](std::string& text) -> std::string {
        char* end = nullptr;
        errno = 0;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || errno == ERANGE) return "'" + text + "' is not a number";
        if (value < 0) return text + " is negative";
        if (value == 0 && !zero_allowed) return "it must be more than 0, got " + text;
        return {};
      },
      zero_allowed ? "NONNEGATIVE" : "POSITIVE");
}
}  // namespace detail

// A number greater than 0.
inline const CLI::Validator positive = detail::number_check(false);
// A number of at least 0.
inline const CLI::Validator non_negative = detail::number_check(true);

// --trace-steps: "A-B" or "A" with 1 <= A <= B; nullopt for anything else.
inline std::optional<std::pair<int64_t, int64_t>> step_range(const std::string& text) {
  long long first = 0, last = 0;
  char dash = 0;
  int used = 0;
  if (std::sscanf(text.c_str(), "%lld%c%lld%n", &first, &dash, &last, &used) == 3 && dash == '-' &&
      std::size_t(used) == text.size()) {
  } else if (std::sscanf(text.c_str(), "%lld%n", &first, &used) == 1 && std::size_t(used) == text.size()) {
    last = first;
  } else {
    return std::nullopt;
  }
  if (first < 1 || last < first) return std::nullopt;
  return std::pair<int64_t, int64_t>{first, last};
}

}  // namespace troupe::cli
