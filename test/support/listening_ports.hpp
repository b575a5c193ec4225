#pragma once
// The TCP ports a process listens on, as `ss -ltnp` shows them (a task's data port is one the
// system picked: tests find it so).
#include <sys/types.h>

#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

namespace troupe::testing {

// The ports `pid` listens on, from `ss`.
inline std::vector<int> listening_ports_of(pid_t pid) {
  std::unique_ptr<FILE, int (*)(FILE*)> out(::popen("ss -ltnpH 2>/dev/null", "r"), ::pclose);
  std::vector<int> ports;
  char line[512];
  while (out && std::fgets(line, sizeof line, out.get())) {
    std::string l = line;
    if (l.find(fmt::format("pid={},", pid)) == std::string::npos) continue;
    std::istringstream fields(l);
    std::string state, recv_q, send_q, local;
    fields >> state >> recv_q >> send_q >> local;
    ports.push_back(std::stoi(local.substr(local.rfind(':') + 1)));
  }
  return ports;
}

// Why ports cannot be listed here ("" when they can): the tests that need them skip.
inline std::string why_no_ports_listed() {
  std::unique_ptr<FILE, int (*)(FILE*)> out(::popen("ss -ltnpH 2>/dev/null", "r"), ::pclose);
  char line[512];
  return out && std::fgets(line, sizeof line, out.get()) ? "" : "ss -ltnp lists nothing here (iproute2 is missing)";
}

}  // namespace troupe::testing
