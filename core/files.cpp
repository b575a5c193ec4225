#include "core/files.hpp"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include "core/checkpoint_internal.hpp"

namespace troupe {

void write_file_durably(const std::string& path, std::string_view text, mode_t mode) {
  namespace d = checkpoint::detail;
  const std::string temp = path + ".tmp";
  try {
    d::Fd fd(::open(temp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode));
    if (!fd) d::fail_errno(errno, "cannot create " + temp);
    d::write_all(fd.get(), text.data(), text.size(), temp);
    d::fsync_fd(fd.get(), temp);
    fd.close_checked(temp);
    if (::rename(temp.c_str(), path.c_str()) != 0) d::fail_errno(errno, "cannot rename " + temp + " to " + path);
  } catch (...) {
    ::unlink(temp.c_str());
    throw;
  }
  const auto slash = path.rfind('/');
  d::fsync_path(slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash));
}

}  // namespace troupe
