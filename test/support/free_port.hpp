#pragma once
// A TCP port nothing listens on now, on 127.0.0.1 (the OS picks it; a test that starts a
// process on it right away races only with other programs binding ports at that moment).
#include <boost/test/unit_test.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>

namespace troupe::testing {

inline uint16_t free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  BOOST_REQUIRE(fd >= 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = 0;
  socklen_t len = sizeof a;
  BOOST_REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  BOOST_REQUIRE(::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0);
  ::close(fd);
  return ntohs(a.sin_port);
}

}  // namespace troupe::testing
