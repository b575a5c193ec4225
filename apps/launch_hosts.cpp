#include "apps/launch_hosts.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <random>
#include <sstream>
#include <stdexcept>
#include <thread>

extern char** environ;

namespace troupe::launch {

namespace {

std::string trim(const std::string& s) {
  const auto first = s.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  return s.substr(first, s.find_last_not_of(" \t\r") - first + 1);
}

int slots_of(const std::string& text, const std::string& where) {
  std::size_t used = 0;
  int n = 0;
  try {
    n = std::stoi(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used != text.size() || n < 1) throw std::invalid_argument(where + ": slots must be a number of at least 1, got '" + text + "'");
  return n;
}

Host host_of(const std::string& entry, const std::string& where) {
  Host h;
  const auto colon = entry.rfind(':');
  h.name = trim(colon == std::string::npos ? entry : entry.substr(0, colon));
  if (colon != std::string::npos) h.slots = slots_of(trim(entry.substr(colon + 1)), where);
  if (h.name.empty()) throw std::invalid_argument(where + ": no host name in '" + entry + "'");
  return h;
}

// The last non-empty line of `text`: what ssh says when it fails.
std::string last_line(const std::string& text) {
  std::istringstream in(text);
  std::string line, last;
  while (std::getline(in, line))
    if (!trim(line).empty()) last = trim(line);
  return last;
}

}  // namespace

std::vector<Host> parse_hosts(const std::string& text) {
  std::vector<Host> hosts;
  std::stringstream in(text);
  std::string entry;
  while (std::getline(in, entry, ','))
    hosts.push_back(host_of(entry, "--hosts " + text));
  if (hosts.empty()) throw std::invalid_argument("--hosts: no host given");
  return hosts;
}

std::vector<Host> read_hostfile(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::invalid_argument("--hostfile " + path + ": cannot read it: " + std::strerror(errno));
  std::vector<Host> hosts;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    line = trim(line.substr(0, line.find('#')));
    if (line.empty()) continue;
    const std::string where = "--hostfile " + path + " line " + std::to_string(number);
    const auto space = line.find_first_of(" \t");
    if (space == std::string::npos) {
      hosts.push_back(host_of(line, where));
      continue;
    }
    const std::string rest = trim(line.substr(space));
    if (rest.rfind("slots=", 0) != 0) throw std::invalid_argument(where + ": expected HOST slots=N, got '" + line + "'");
    hosts.push_back({line.substr(0, space), slots_of(rest.substr(6), where)});
  }
  if (hosts.empty()) throw std::invalid_argument("--hostfile " + path + ": no host in it");
  return hosts;
}

std::vector<std::pair<std::string, std::string>> place_tasks(const std::vector<Host>& hosts,
                                                             const std::vector<std::pair<std::string, int>>& jobs,
                                                             int base_port) {
  int slots = 0, tasks = 0;
  for (auto& h : hosts) slots += h.slots;
  for (auto& [job, n] : jobs) tasks += n;
  if (tasks > slots)
    throw std::invalid_argument("the job has " + std::to_string(tasks) + " tasks and the hosts " +
                                std::to_string(slots) + " slot(s): give more hosts or HOST:SLOTS");
  std::vector<std::pair<std::string, std::string>> placed;
  std::map<std::string, int> ports_taken;  // by host name: a host listed twice takes the next ports
  std::size_t host = 0;
  int used = 0;  // slots of hosts[host] taken
  for (auto& [job, n] : jobs)
    for (int k = 0; k < n; ++k) {
      while (used == hosts[host].slots) ++host, used = 0;
      const std::string& name = hosts[host].name;
      placed.push_back({job + ":" + std::to_string(k), name + ":" + std::to_string(base_port + ports_taken[name]++)});
      ++used;
    }
  return placed;
}

std::string file_stem(const std::string& task) {
  std::string stem = task;
  stem[stem.find(':')] = '-';
  return stem;
}

pid_t spawn_in_group(const std::vector<std::string>& argv, int in, int out, const std::string& what) {
  std::vector<std::string> copy = argv;
  std::vector<char*> args;
  for (auto& a : copy) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  if (in >= 0) posix_spawn_file_actions_adddup2(&files, in, 0);
  posix_spawn_file_actions_adddup2(&files, out, 1);
  posix_spawn_file_actions_adddup2(&files, out, 2);
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  pid_t pid = -1;
  const int rc = posix_spawnp(&pid, args[0], &files, &attributes, args.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&files);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0] + what + ": " + std::strerror(rc));
  return pid;
}

int exit_code_of(int status) { return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status); }

std::string shell_quote(const std::string& text) {
  std::string out = "'";
  for (char c : text) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::string remote_task_script(const std::string& task, const std::vector<std::string>& argv, const std::string& dir,
                               const std::string& cwd, const std::vector<std::string>& env) {
  std::string command = "env";
  for (auto& e : env) command += " " + shell_quote(e);
  for (auto& a : argv) command += " " + shell_quote(a);
  // fd 3 keeps the session's input for the watchdog (an asynchronous list's own input is
  // /dev/null); the task's is /dev/null.
  return "cd " + shell_quote(cwd) + " 2>/dev/null || cd; exec 3<&0 </dev/null; " + command + " & p=$!; echo $p > " +
         shell_quote(dir + "/" + file_stem(task) + ".pid") +
         "; { if read -r line <&3 && [ \"$line\" = kill ]; then kill -KILL $p; kill -CONT $p; else kill -TERM $p; "
         "sleep 10; kill -KILL $p; fi; } >/dev/null 2>&1 & w=$!; exec 3<&-; wait $p; rc=$?; kill $w 2>/dev/null; "
         "exit $rc";
}

std::vector<std::string> ssh_command(const std::vector<std::string>& ssh, const std::string& host,
                                     const std::string& remote_command) {
  std::vector<std::string> argv = ssh;
  for (const char* o : {"-o", "BatchMode=yes", "-o", "ConnectTimeout=10", "-o", "ServerAliveInterval=5", "-o",
                        "ServerAliveCountMax=3"})
    argv.push_back(o);
  argv.push_back(host);
  argv.push_back(remote_command);
  return argv;
}

Outcome run_bounded(const std::vector<std::string>& argv, const std::string& input, std::chrono::milliseconds bound) {
  int in[2], out[2];
  if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0)
    throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  pid_t pid = -1;
  try {
    pid = spawn_in_group(argv, in[0], out[1]);
  } catch (...) {
    for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
    throw;
  }
  ::close(in[0]);
  ::close(out[1]);
  ::fcntl(in[1], F_SETFL, O_NONBLOCK);
  Outcome outcome;
  std::size_t written = 0;
  if (input.empty()) ::close(in[1]), in[1] = -1;
  const auto deadline = std::chrono::steady_clock::now() + bound;
  bool timed_out = false;
  while (out[0] >= 0) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      timed_out = true;
      break;
    }
    pollfd fds[2] = {{out[0], POLLIN, 0}, {in[1], POLLOUT, 0}};
    ::poll(fds, in[1] >= 0 ? 2 : 1, int(std::min<long>(left.count(), 100)));
    if (fds[0].revents) {
      char buffer[4096];
      const ssize_t n = ::read(out[0], buffer, sizeof buffer);
      if (n > 0) outcome.output.append(buffer, std::size_t(n));
      else ::close(out[0]), out[0] = -1;
    }
    if (in[1] >= 0 && fds[1].revents) {
      const ssize_t n = ::write(in[1], input.data() + written, input.size() - written);
      if (n > 0) written += std::size_t(n);
      if (n < 0 || written == input.size()) ::close(in[1]), in[1] = -1;
    }
  }
  if (in[1] >= 0) ::close(in[1]);
  if (out[0] >= 0) ::close(out[0]);
  int status = 0;
  if (timed_out) ::kill(-pid, SIGKILL);
  ::waitpid(pid, &status, 0);
  outcome.exit_code = timed_out ? -1 : exit_code_of(status);
  return outcome;
}

void copy_to_hosts(const std::vector<std::string>& ssh, const std::map<std::string, std::vector<std::string>>& files,
                   const std::string& dir, std::chrono::milliseconds bound) {
  // A host that sees `dir` itself has the files already: a marker of a name no other launch has
  // tells it so, and it unpacks nothing. Several hosts unpacking into one shared directory at once
  // would trip over each other's files.
  std::random_device random;
  std::ostringstream name;
  name << ".troupe-launch-" << getpid() << "-" << std::hex << random() << random();
  const std::string marker = name.str();
  std::ofstream(std::filesystem::path(dir) / marker).close();
  const std::string unpack = "if test -f " + shell_quote(dir + "/" + marker) + "; then cat >/dev/null; else mkdir -p " +
                             shell_quote(dir) + " && tar -C " + shell_quote(dir) + " -xf -; fi";
  std::vector<std::thread> threads;
  std::map<std::string, std::string> failures;  // host -> why
  std::mutex mutex;
  for (auto& [host, names] : files)
    threads.emplace_back([&, host = host, names = names] {
      std::string why;
      try {
        std::vector<std::string> tar{"tar", "-C", dir, "-cf", "-"};
        tar.insert(tar.end(), names.begin(), names.end());
        const Outcome archive = run_bounded(tar, "", bound);
        if (archive.exit_code != 0) throw std::runtime_error("tar of " + dir + " failed: " + last_line(archive.output));
        const Outcome copied = run_bounded(ssh_command(ssh, host, unpack), archive.output, bound);
        if (copied.exit_code == -1)
          why = "no answer over ssh within " + std::to_string(bound.count() / 1000) + " s";
        else if (copied.exit_code == 255)
          why = "cannot reach it or log in over ssh (" + last_line(copied.output) + ")";
        else if (copied.exit_code != 0)
          why = "copying the job's files into " + dir + " there failed (" + last_line(copied.output) + ")";
      } catch (const std::exception& e) {
        why = e.what();
      }
      if (!why.empty()) {
        std::lock_guard<std::mutex> lock(mutex);
        failures[host] = why;
      }
    });
  for (auto& t : threads) t.join();
  std::filesystem::remove(std::filesystem::path(dir) / marker);
  if (failures.empty()) return;
  std::string message;
  for (auto& [host, why] : failures) message += (message.empty() ? "" : "; ") + ("host " + host + ": " + why);
  throw std::runtime_error(message);
}

void remove_from_hosts(const std::vector<std::string>& ssh, const std::vector<std::string>& hosts,
                       const std::string& dir, std::chrono::milliseconds bound) {
  std::vector<std::thread> threads;
  for (auto& host : hosts)
    threads.emplace_back([&, host] {
      const Outcome o = run_bounded(ssh_command(ssh, host, "rm -rf " + shell_quote(dir)), "", bound);
      if (o.exit_code != 0)
        std::fprintf(stderr, "troupe-launch: could not remove %s on %s: %s\n", dir.c_str(), host.c_str(),
                     o.exit_code == -1 ? "no answer within the bound" : last_line(o.output).c_str());
    });
  for (auto& t : threads) t.join();
}

}  // namespace troupe::launch
