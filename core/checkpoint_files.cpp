// POSIX file helpers of the checkpoint code: every failure names the file and errno.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "core/checkpoint_internal.hpp"

namespace troupe::checkpoint::detail {

namespace {

// One write() or read() moves at most this much: Linux caps a call at 2 GiB - 4 KiB anyway,
// and bigger calls gain nothing.
constexpr std::size_t kMaxIoBytes = std::size_t(1) << 30;

}  // namespace

ErrorCode code_for_errno(int err) {
  switch (err) {
    case ENOSPC:
    case EDQUOT: return ErrorCode::resource_exhausted;
    case EACCES:
    case EPERM:
    case EROFS: return ErrorCode::permission_denied;
    case ENOENT: return ErrorCode::not_found;
    default: return ErrorCode::unavailable;
  }
}

void fail_errno(int err, ErrorCode code, const std::string& what) {
  const char* name = strerrorname_np(err);
  fail(code, "{}: {} ({})", what, std::strerror(err), name ? name : std::to_string(err));
}

void fail_errno(int err, const std::string& what) { fail_errno(err, code_for_errno(err), what); }

Fd& Fd::operator=(Fd&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    o.fd_ = -1;
  }
  return *this;
}

Fd::~Fd() {
  if (fd_ >= 0) ::close(fd_);
}

void Fd::close_checked(const std::string& path) {
  int fd = fd_;
  fd_ = -1;
  // Linux frees the descriptor even when close fails, so it is never retried.
  if (fd >= 0 && ::close(fd) != 0 && errno != EINTR) fail_errno(errno, "closing " + path);
}

std::string join(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  return dir.back() == '/' ? dir + name : dir + "/" + name;
}

void write_all(int fd, const void* data, std::size_t size, const std::string& path) {
  auto* p = static_cast<const unsigned char*>(data);
  while (size > 0) {
    ssize_t n = ::write(fd, p, std::min(size, kMaxIoBytes));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno(errno, "writing " + path);
    }
    if (n == 0) fail_errno(ENOSPC, "writing " + path);
    p += n;
    size -= std::size_t(n);
  }
}

bool pread_all(int fd, void* data, std::size_t size, uint64_t offset, const std::string& path) {
  auto* p = static_cast<unsigned char*>(data);
  while (size > 0) {
    ssize_t n = ::pread(fd, p, std::min(size, kMaxIoBytes), off_t(offset));
    if (n < 0) {
      if (errno == EINTR) continue;
      fail_errno(errno, ErrorCode::data_loss, "reading " + path);
    }
    if (n == 0) return false;
    p += n;
    size -= std::size_t(n);
    offset += uint64_t(n);
  }
  return true;
}

void fsync_fd(int fd, const std::string& path) {
  while (::fsync(fd) != 0) {
    if (errno != EINTR) fail_errno(errno, "fsync of " + path);
  }
}

void fsync_path(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) fail_errno(errno, "opening " + path + " to fsync it");
  fsync_fd(fd.get(), path);
}

std::vector<unsigned char> read_file(const std::string& path) {
  Fd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) fail_errno(errno, errno == ENOENT ? ErrorCode::not_found : ErrorCode::data_loss,
                      "opening " + path);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) fail_errno(errno, ErrorCode::data_loss, "stat of " + path);
  if (!S_ISREG(st.st_mode)) fail(ErrorCode::data_loss, "{}: not a regular file", path);
  std::vector<unsigned char> bytes(std::size_t(st.st_size));
  if (!pread_all(fd.get(), bytes.data(), bytes.size(), 0, path))
    fail(ErrorCode::data_loss, "{}: the file shrank while it was read", path);
  return bytes;
}

}  // namespace troupe::checkpoint::detail
