#pragma once
// A program started by a test, its output in files; stopped by its pid (SIGKILL, then reaped)
// when this goes out of scope, also when the test fails. Every wait on it is bounded; a wait for
// its output ends early when it has exited, and state() tells what it is doing when one fails.
#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
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
  // SIGSTOP, then waits (at most `bound`) until every thread of the process has stopped: kill()
  // returns before they have, and a thread on another core may still run a little while.
  // False if they had not within the bound.
  bool stop(std::chrono::milliseconds bound) const {
    ::kill(pid_, SIGSTOP);
    const auto deadline = std::chrono::steady_clock::now() + bound;
    while (!all_threads_stopped()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
  // The exit code (128 + signal if killed), or nullopt if still running after `bound`.
  std::optional<int> wait_exit(std::chrono::milliseconds bound) {
    auto deadline = std::chrono::steady_clock::now() + bound;
    while (!reaped()) {
      if (std::chrono::steady_clock::now() > deadline) return std::nullopt;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return status_;
  }
  std::string out() const { return read(out_path_); }
  std::string err() const { return read(err_path_); }
  // Waits, at most `bound`, until the output contains `text`; false at once if the program
  // exits without writing it.
  bool wait_for_output(const std::string& text, std::chrono::milliseconds bound) const {
    auto deadline = std::chrono::steady_clock::now() + bound;
    while (out().find(text) == std::string::npos) {
      if (reaped()) return out().find(text) != std::string::npos;
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }
  // What the program is doing, for a failed wait's message: its exit code if it has ended, else
  // each thread's name, scheduler state and kernel wait channel, and the threads' stacks as gdb
  // prints them (where gdb is installed; at most 60 s), written beside its output. Seconds of
  // work: call it only once a wait has failed (not as a BOOST_TEST message, which is built
  // whether the check passes or not).
  std::string state() const {
    if (reaped())
      return "\n[pid " + std::to_string(pid_) + " exited with code " + std::to_string(*status_) + "]\n";
    namespace fs = std::filesystem;
    const std::string proc = "/proc/" + std::to_string(pid_);
    std::string s = "\n[pid " + std::to_string(pid_) + " still running; its threads (name, state, wait channel):\n";
    std::error_code ec;
    for (const auto& task : fs::directory_iterator(proc + "/task", ec)) {
      const std::string t = task.path().string();
      std::string stat = read(t + "/stat");  // "tid (name) S ...": the state follows the name
      const auto close = stat.rfind(')');
      const char run_state = close != std::string::npos && close + 2 < stat.size() ? stat[close + 2] : '?';
      std::string name = read(t + "/comm");
      if (!name.empty() && name.back() == '\n') name.pop_back();
      s += "  " + task.path().filename().string() + " " + name + " " + run_state + " " + read(t + "/wchan") + "\n";
    }
    if (std::system("command -v gdb >/dev/null 2>&1") == 0) {
      const std::string stacks = out_path_ + ".stacks";
      const std::string command = "timeout 60 gdb -p " + std::to_string(pid_) +
                                  " -batch -nx -ex 'thread apply all bt' >'" + stacks + "' 2>&1";
      const int rc = std::system(command.c_str());
      s += "  its threads' stacks (gdb, exit " + std::to_string(rc) + "): " + stacks + "\n" + read(stacks);
    }
    return s + "]\n";
  }

 private:
  // Every thread's state in /proc is 't' or 'T' (stopped).
  bool all_threads_stopped() const {
    const std::filesystem::path tasks = "/proc/" + std::to_string(pid_) + "/task";
    std::error_code ec;
    for (const auto& t : std::filesystem::directory_iterator(tasks, ec)) {
      std::string stat = read((t.path() / "stat").string());
      const auto paren = stat.rfind(')');
      if (paren == std::string::npos || paren + 2 >= stat.size()) return false;
      const char state = stat[paren + 2];
      if (state != 'T' && state != 't') return false;
    }
    return !ec;
  }
  static std::string read(const std::string& path) {
    std::ifstream in(path);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  // True once the program has ended (and was reaped: status_ holds its code).
  bool reaped() const {
    if (status_) return true;
    int status = 0;
    if (pid_ <= 0 || ::waitpid(pid_, &status, WNOHANG) != pid_) return false;
    status_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    return true;
  }
  pid_t pid_ = -1;
  mutable std::optional<int> status_;
  std::string out_path_, err_path_;
};

}  // namespace troupe::testing
