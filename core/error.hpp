#pragma once
// Errors: every failure in Troupe is a troupe::Error carrying a code and a message that says
// what failed, where (node, op, device, file) and the values involved.
#include <ostream>
#include <stdexcept>
#include <string>
#include <fmt/format.h>

namespace troupe {

enum class ErrorCode : int {
  ok = 0,
  invalid_argument,
  not_found,
  already_exists,
  failed_precondition,
  out_of_range,
  unimplemented,
  internal,
  aborted,
  cancelled,
  unavailable,
  resource_exhausted,
  data_loss,
  deadline_exceeded,
  permission_denied,  // a file or directory this process may not write (EACCES, EPERM, EROFS)
};

const char* to_string(ErrorCode code);
inline std::ostream& operator<<(std::ostream& out, ErrorCode c) { return out << to_string(c); }

class Error : public std::runtime_error {
 public:
  Error(ErrorCode code, std::string message, std::string device = {})
      : std::runtime_error(std::move(message)), code_(code), device_(std::move(device)) {}
  ErrorCode code() const { return code_; }
  // The full name of the device whose node failed ("/job:ps/task:1/device:CPU:0"), as data for
  // what recovers from it; "" when no node's failure is the cause (or not known).
  const std::string& device() const { return device_; }

 private:
  ErrorCode code_;
  std::string device_;
};

template <class... Args>
[[noreturn]] void fail(ErrorCode code, fmt::format_string<Args...> format, Args&&... args) {
  throw Error(code, fmt::format(format, std::forward<Args>(args)...));
}

#define TROUPE_CHECK_ARG(cond, ...) \
  do {                              \
    if (!(cond)) ::troupe::fail(::troupe::ErrorCode::invalid_argument, __VA_ARGS__); \
  } while (0)

}  // namespace troupe
