#pragma once
// Helpers shared by the checkpoint's index, save and read files: POSIX files with errors that
// name the file and errno, and the checks of a list of index entries. Internal: not installed.
#include <string>
#include <vector>

#include "core/checkpoint.hpp"

namespace troupe::checkpoint::detail {

// The error code for a failed system call: resource_exhausted for a full disk or quota,
// permission_denied for a permission or read-only file system, not_found, else unavailable.
ErrorCode code_for_errno(int err);
// "<what>: <strerror> (<ENAME>)", thrown with `code`, or with code_for_errno(err) by default.
[[noreturn]] void fail_errno(int err, const std::string& what);
[[noreturn]] void fail_errno(int err, ErrorCode code, const std::string& what);

// An open file descriptor, closed on destruction.
class Fd {
 public:
  Fd() = default;
  explicit Fd(int fd) : fd_(fd) {}
  Fd(Fd&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  Fd& operator=(Fd&& o) noexcept;
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  ~Fd();
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }
  // close(2) with its error reported (a write-back error can surface only there).
  void close_checked(const std::string& path);

 private:
  int fd_ = -1;
};

std::string join(const std::string& dir, const std::string& name);
// Writes all `size` bytes (large write() calls, retried on EINTR and short writes).
void write_all(int fd, const void* data, std::size_t size, const std::string& path);
// Reads exactly `size` bytes at `offset`; false when the file ends first.
bool pread_all(int fd, void* data, std::size_t size, uint64_t offset, const std::string& path);
void fsync_fd(int fd, const std::string& path);
// Opens (a directory or a file) read-only and fsyncs it.
void fsync_path(const std::string& path);
// The whole of a small file (an index or the pointer); throws with errno naming `path`.
std::vector<unsigned char> read_file(const std::string& path);

// A name that stays inside its directory: not empty, no '/', not "." or "..", no NUL.
bool is_plain_file_name(const std::string& name);

// The row size in bytes and the whole-variable checks of one entry (dtype, shape, rows, length
// and file name); failures are `code` naming `where` and the variable.
void check_entry(const IndexEntry& e, const std::string& where, ErrorCode code);
// check_entry for each, and per variable: one dtype and full shape, slices that cover its rows
// exactly once. Sorts the entries by (name, row_begin).
void check_entries(std::vector<IndexEntry>& entries, const std::string& where, ErrorCode code);

// Bytes per row of a variable of this dtype and full shape (a scalar is one row).
uint64_t row_bytes(DType dtype, const Shape& full_shape);

}  // namespace troupe::checkpoint::detail
