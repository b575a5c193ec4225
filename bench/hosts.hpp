#pragma once
// Benchmarks across hosts on one machine: `--hosts NS=ADDRESS,...` names network namespaces
// (made with `ip netns add`, as bench/shaped_links.sh does) and each one's address; a process
// enters its namespace before it opens any socket. Without the flag everything is on 127.0.0.1.
#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.hpp"

namespace troupe::bench {

struct Host {
  std::string netns;  // empty: stay where this process is
  std::string address = "127.0.0.1";
};

// "NS=ADDRESS" entries; throws invalid_argument naming the entry that is not one.
inline std::vector<Host> parse_hosts(const std::vector<std::string>& entries) {
  std::vector<Host> out;
  for (const auto& e : entries) {
    const auto eq = e.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == e.size())
      fail(ErrorCode::invalid_argument, "--hosts: '{}' is not NAMESPACE=ADDRESS", e);
    out.push_back({e.substr(0, eq), e.substr(eq + 1)});
  }
  return out;
}

// Moves the calling thread (call it before any other thread exists) into `host`'s namespace.
inline void enter(const Host& host) {
  if (host.netns.empty()) return;
  const std::string path = "/var/run/netns/" + host.netns;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) fail(ErrorCode::invalid_argument, "--hosts: no network namespace {} ({})", path, std::strerror(errno));
  const int rc = ::setns(fd, CLONE_NEWNET);
  const int e = errno;
  ::close(fd);
  if (rc != 0) fail(ErrorCode::unavailable, "cannot enter network namespace {}: {}", host.netns, std::strerror(e));
}

}  // namespace troupe::bench
