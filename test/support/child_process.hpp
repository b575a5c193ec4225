#pragma once
// A program started by a test, its output in files; stopped by its pid (SIGKILL, then reaped)
// when this goes out of scope, also when the test fails. Every wait on it is bounded.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace troupe::testing {

class ChildProcess {
 public:
  ChildProcess(std::vector<std::string> argv, std::string out_path, std::string err_path)
      : out_path_(std::move(out_path)), err_path_(std::move(err_path)) {
    // Everything the child needs is made before the fork: in a parent with other threads (an
    // actor system's) the child may call only async-signal-safe functions, not malloc.
    std::vector<char*> args;
    for (auto& a : argv) args.push_back(a.data());
    args.push_back(nullptr);
    const pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ == 0) {
      // Killed with the test too when the test itself is killed (ctest's timeout), so that no
      // process it started outlives it (strictly: when the thread that started it ends; tests
      // start their processes from their main thread).
      if (::prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || ::getppid() != parent) ::_exit(125);
      int out = ::open(out_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int err = ::open(err_path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (out < 0 || err < 0 || ::dup2(out, 1) < 0 || ::dup2(err, 2) < 0) ::_exit(126);
      ::execv(args[0], args.data());
      ::_exit(127);
    }
  }
  ~ChildProcess() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
    }
  }
  ChildProcess(const ChildProcess&) = delete;
  ChildProcess& operator=(const ChildProcess&) = delete;

  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  void signal(int sig) const { ::kill(pid_, sig); }
  // The exit code (128 + signal if killed), or nullopt if still running after `bound`.
  std::optional<int> wait_exit(std::chrono::milliseconds bound) {
    auto deadline = std::chrono::steady_clock::now() + bound;
    while (!status_) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WNOHANG);
      if (r == pid_) {
        status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
        break;
      }
      if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status_;
  }
  std::string out() const { return read(out_path_); }
  std::string err() const { return read(err_path_); }
  // Waits, at most `bound`, until the output contains `text`.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds bound) const {
    auto deadline = std::chrono::steady_clock::now() + bound;
    while (out().find(text) == std::string::npos) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

 private:
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  pid_t pid_ = -1;
  std::optional<int> status_;
  std::string out_path_, err_path_;
};

}  // namespace troupe::testing
