#include "core/error.hpp"

namespace troupe {

const char* to_string(ErrorCode code) {
  switch (code) {
    case ErrorCode::ok: return "ok";
    case ErrorCode::invalid_argument: return "invalid argument";
    case ErrorCode::not_found: return "not found";
    case ErrorCode::already_exists: return "already exists";
    case ErrorCode::failed_precondition: return "failed precondition";
    case ErrorCode::out_of_range: return "out of range";
    case ErrorCode::unimplemented: return "unimplemented";
    case ErrorCode::internal: return "internal";
    case ErrorCode::aborted: return "aborted";
    case ErrorCode::cancelled: return "cancelled";
    case ErrorCode::unavailable: return "unavailable";
    case ErrorCode::resource_exhausted: return "resource exhausted";
    case ErrorCode::data_loss: return "data loss";
    case ErrorCode::deadline_exceeded: return "deadline exceeded";
    case ErrorCode::permission_denied: return "permission denied";
  }
  return "unknown";
}

}  // namespace troupe
