#pragma once
// CLI11 checks for the numbers Troupe's programs take, with messages that say what is wrong:
// "--batch: 'abc' is not a number", "--steps: -3 is negative" (CLI11's own PositiveNumber says
// "Value abc not in range 0.000000 to 1797...", which names neither).
#include <CLI/CLI.hpp>

#include <cerrno>
#include <cstdlib>
#include <string>

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

}  // namespace troupe::cli
