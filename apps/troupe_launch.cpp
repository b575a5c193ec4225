// troupe-launch: a local cluster in one command (docs/cluster.md, "A local cluster in one
// command").
//   troupe-launch [--ps N] [--workers N] [--backup-workers K] [--node PATH] [--dir DIR] -- COMMAND [ARGS...]
// Picks free ports on 127.0.0.1 for ps:0..N-1 and worker:0..N-1, writes the cluster spec
// (DIR/cluster.json; DIR defaults to a new directory under /tmp, removed at the end), starts every ps task as
// `troupe-node --cluster SPEC --task ps:K` and, once they listen, every worker as
// `COMMAND ARGS --cluster SPEC --task worker:K` (each process's command line names its task, so
// `ps` finds it; --backup-workers K is passed on to them too). Every line a process prints is
// shown prefixed by its task, except the chief's (worker:0's) "progress: ..." lines, which make
// one progress display for the job (ProgressDisplay). The job ends when
// every worker has exited, or one has failed (exited non-zero), which stops the others; the ps
// tasks are then stopped (SIGTERM, then SIGKILL after 10 s).
// Ctrl-C or SIGTERM stops every process the same way. A ps task that exits while workers run
// stops the job, unless --restart-ps N: then it is started again (at most N times per task; the
// workers' Supervisor restores its variables from the chief's checkpoint, actors/supervisor.hpp).
// With --restart-workers N a worker that fails (a non-zero exit, a signal) is started again with
// --rejoin added to its command (it joins at the current global step). With --hang-timeout S (10
// by default when either restart is on) a task that answered once and then does not answer for S
// seconds (stopped, hung) is killed (and then restarted as above): a thread asks every task who
// it is (identify_member, bounded) in turn.
// With --spares N, N standby tasks (spare:0..) run troupe-node too: a ps task that dies and is not
// started again (--restart-ps spent or 0) does not fail the job; the chief's Supervisor has a spare
// take it over and restores its variables there.
// With --tls every connection of the cluster is mutual TLS: a CA and certificates are made in
// DIR/tls (troupe-node --make-certs) and the tasks get DIR/tls/cluster.json as their spec.
// Every process's pid is kept in DIR/<job>-<index>.pid (for scripts that kill one). Exit code: 0
// when every worker exited with 0 and no ps task died for good, 1 otherwise, 2 for a bad command
// line.
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <atomic>
#include <map>
#include <set>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "actors/cluster/cluster_spec.hpp"
#include "actors/cluster/tls.hpp"
#include "actors/cluster/member.hpp"
#include "apps/cli_checks.hpp"
#include "core/error.hpp"

extern char** environ;

namespace {

volatile sig_atomic_t stop_requested = 0;
void on_stop_signal(int) { stop_requested = 1; }

// One process of the job: its task, pid, and the pipe its stdout and stderr come through.
struct Process {
  std::string task;
  std::vector<std::string> argv;
  pid_t pid = -1;
  int out = -1;         // read end
  std::string partial;  // a line not yet ended
  std::optional<int> exit_code;
  bool started = false;  // printed "started on" (ps tasks)
};

// The job's progress display: the chief's "progress: ..." lines, shown as one line. On a
// terminal it stays at the bottom, rewritten in place, with the processes' lines scrolling
// above it; otherwise it is printed as "[job] ..." at most every 5 s (and the last one at the end).
struct ProgressDisplay {
  bool tty = ::isatty(STDOUT_FILENO) != 0;
  std::string latest;   // the newest progress, without "progress: "
  bool shown = false;   // on a terminal: the display is the current line
  bool pending = false; // not a terminal: a newer progress than the one printed
  std::chrono::steady_clock::time_point printed{};

  void clear() {
    if (tty && shown) std::printf("\r\033[K");
    shown = false;
  }
  void show() {
    if (latest.empty()) return;
    if (tty) {
      std::printf("\r\033[K[job] %s", latest.c_str());
      shown = true;
    } else if (pending && std::chrono::steady_clock::now() - printed >= std::chrono::seconds(5)) {
      flush();
    }
    std::fflush(stdout);
  }
  void flush() {  // print the newest progress as a line of its own, if not printed yet
    if (!pending) return;
    std::printf("[job] %s\n", latest.c_str());
    std::fflush(stdout);
    pending = false;
    printed = std::chrono::steady_clock::now();
  }
  void update(const std::string& progress) {
    latest = progress;
    pending = true;
    show();
  }
};
ProgressDisplay progress_display;

void print_line(const std::string& task, const std::string& line) {
  static const std::string kProgress = "progress: ";
  if (task == "worker:0" && line.rfind(kProgress, 0) == 0) {
    progress_display.update(line.substr(kProgress.size()));
    return;
  }
  progress_display.clear();
  std::printf("[%s] %s\n", task.c_str(), line.c_str());
  progress_display.show();
  std::fflush(stdout);
}

std::string pid_dir;  // where DIR/<job>-<index>.pid files go

Process spawn(const std::string& task, std::vector<std::string> argv) {
  const std::vector<std::string> given = argv;
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  std::vector<char*> args;
  for (auto& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  posix_spawn_file_actions_t files;
  posix_spawn_file_actions_init(&files);
  posix_spawn_file_actions_adddup2(&files, fds[1], 1);
  posix_spawn_file_actions_adddup2(&files, fds[1], 2);
  // A process group of its own: stopping the task stops what it started too, and a terminal's
  // Ctrl-C reaches only troupe-launch, which stops the tasks in order.
  posix_spawnattr_t attributes;
  posix_spawnattr_init(&attributes);
  posix_spawnattr_setflags(&attributes, POSIX_SPAWN_SETPGROUP);
  posix_spawnattr_setpgroup(&attributes, 0);
  Process p;
  p.task = task;
  const int rc = posix_spawnp(&p.pid, args[0], &files, &attributes, args.data(), environ);
  posix_spawnattr_destroy(&attributes);
  posix_spawn_file_actions_destroy(&files);
  ::close(fds[1]);
  if (rc != 0) {
    ::close(fds[0]);
    throw std::runtime_error("cannot start " + argv[0] + " for " + task + ": " + std::strerror(rc));
  }
  p.out = fds[0];
  p.argv = given;
  std::string file = task;
  file[file.find(':')] = '-';
  std::ofstream(std::filesystem::path(pid_dir) / (file + ".pid")) << p.pid << "\n";
  return p;
}

// Shows what the processes printed, for at most `wait_ms`; notes the processes that exited.
void pump(std::vector<Process>& all, int wait_ms) {
  std::vector<pollfd> fds;
  for (auto& p : all)
    if (p.out >= 0) fds.push_back({p.out, POLLIN, 0});
  if (!fds.empty()) ::poll(fds.data(), fds.size(), wait_ms);
  else std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
  for (auto& p : all) {
    if (p.out < 0) continue;
    char buffer[4096];
    for (;;) {
      pollfd one{p.out, POLLIN, 0};
      if (::poll(&one, 1, 0) <= 0) break;
      ssize_t n = ::read(p.out, buffer, sizeof buffer);
      if (n <= 0) {
        if (!p.partial.empty()) print_line(p.task, p.partial);
        p.partial.clear();
        ::close(p.out);
        p.out = -1;
        break;
      }
      p.partial.append(buffer, std::size_t(n));
      for (auto end = p.partial.find('\n'); end != std::string::npos; end = p.partial.find('\n')) {
        const std::string line = p.partial.substr(0, end);
        if (line.find("started on") != std::string::npos) p.started = true;
        print_line(p.task, line);
        p.partial.erase(0, end + 1);
      }
    }
  }
  for (auto& p : all) {
    if (p.exit_code || p.pid <= 0) continue;
    int status = 0;
    if (::waitpid(p.pid, &status, WNOHANG) == p.pid)
      p.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }
}

// SIGTERM to every process still running (its process group), SIGKILL to those still running
// 10 s later.
void stop(std::vector<Process>& all) {
  for (auto& p : all)
    if (!p.exit_code) ::kill(-p.pid, SIGTERM);  // its process group
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  auto running = [&] {
    for (auto& p : all)
      if (!p.exit_code) return true;
    return false;
  };
  while (running() && std::chrono::steady_clock::now() < deadline) pump(all, 50);
  for (auto& p : all)
    if (!p.exit_code) {
      std::fprintf(stderr, "troupe-launch: %s (pid %d) did not stop within 10 s: killing it\n", p.task.c_str(), int(p.pid));
      ::kill(-p.pid, SIGKILL);
      int status = 0;
      ::waitpid(p.pid, &status, 0);
      p.exit_code = 128 + SIGKILL;
    }
  pump(all, 0);
}

// When each task last answered who it is: a thread of its own asks every task in turn, each
// question bounded, so a stopped or hung process is told from a busy one.
class HealthProbe {
 public:
  HealthProbe(const troupe::ClusterSpec& spec, std::chrono::milliseconds bound) : bound_(bound), tls_(spec.tls_client()) {
    for (auto& task : spec.tasks()) tasks_.push_back({task.to_string(), spec.address(task)});
    thread_ = std::thread([this] { loop(); });
  }
  ~HealthProbe() {
    stopping_ = true;
    thread_.join();
  }
  // How long the task has been silent since it last answered; nullopt while it never has.
  std::optional<double> silent_for(const std::string& task) {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = answered_.find(task);
    if (it == answered_.end()) return std::nullopt;
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - it->second).count();
  }
  // A task started again counts only once it has answered again.
  void forget(const std::string& task) {
    std::lock_guard<std::mutex> lock(mutex_);
    answered_.erase(task);
  }

 private:
  void loop() {
    while (!stopping_) {
      for (auto& [task, address] : tasks_) {
        if (stopping_) return;
        try {
          troupe::identify_member(address, bound_, {.threads = 1, .tls = tls_});
          std::lock_guard<std::mutex> lock(mutex_);
          answered_[task] = std::chrono::steady_clock::now();
        } catch (const troupe::Error&) {
        }
      }
      for (int i = 0; i < 5 && !stopping_; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }
  std::chrono::milliseconds bound_;
  troupe::TlsFiles tls_;  // the spec's client identity, with TLS
  std::vector<std::pair<std::string, troupe::TaskAddress>> tasks_;
  std::mutex mutex_;
  std::map<std::string, std::chrono::steady_clock::time_point> answered_;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
};

std::string node_binary(const std::string& given) {
  if (!given.empty()) return given;
  const auto self = std::filesystem::read_symlink("/proc/self/exe").parent_path();
  return (self / "troupe-node").string();  // installed and built beside it
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"troupe-launch: a local cluster in one command"};
  int ps = 1, workers = 1;
  int backup_workers = -1;
  int restart_ps = 0, restart_workers = 0;
  double hang_timeout = -1;
  std::string node, dir;
  std::vector<std::string> command;
  app.add_option("--ps", ps, "parameter-server tasks (troupe-node)")->check(troupe::cli::non_negative)->capture_default_str();
  app.add_option("--workers", workers, "worker tasks (the command)")->check(troupe::cli::positive)->capture_default_str();
  app.add_option("--backup-workers", backup_workers,
                 "passed on to every worker's command as --backup-workers K (synchronous training)")
      ->check(troupe::cli::non_negative);
  app.add_option("--restart-ps", restart_ps,
                 "start a ps task that dies while the workers run again, at most N times per task (the workers need "
                 "--checkpoint-dir to get its variables back)")
      ->check(troupe::cli::non_negative);
  app.add_option("--restart-workers", restart_workers,
                 "start a worker that fails while the job runs again, with --rejoin, at most N times per worker")
      ->check(troupe::cli::non_negative);
  app.add_option("--hang-timeout", hang_timeout,
                 "kill a task that answered and then stays silent this many seconds (stopped, hung); 0: never "
                 "(default: 10 with --restart-ps or --restart-workers, else 0)")
      ->check(troupe::cli::non_negative);
  int spares = 0;
  app.add_option("--spares", spares,
                 "start N standby tasks (spare:0.., troupe-node): a ps task that dies and is not started again "
                 "(--restart-ps spent) is taken over by one, the chief restoring its variables there")
      ->check(troupe::cli::non_negative);
  bool tls = false;
  app.add_flag("--tls", tls,
               "mutual TLS between all tasks: a CA and certificates for the cluster in DIR/tls (troupe-node "
               "--make-certs); the spec the tasks get is DIR/tls/cluster.json");
  app.add_option("--node", node, "the troupe-node program (default: beside troupe-launch)");
  app.add_option("--dir", dir, "where the cluster spec is written (default: a new directory under /tmp)");
  app.add_option("command", command, "the worker's command, after --; each worker gets --cluster SPEC --task worker:K")
      ->required();
  CLI11_PARSE(app, argc, argv);

  struct sigaction stop_action{};
  stop_action.sa_handler = on_stop_signal;
  sigaction(SIGINT, &stop_action, nullptr);
  sigaction(SIGTERM, &stop_action, nullptr);

  std::vector<Process> all;
  bool own_dir = false;  // made here: removed at the end
  std::string spec;
  try {
    if (dir.empty()) {
      own_dir = true;
      char pattern[] = "/tmp/troupe-launch-XXXXXX";
      if (!::mkdtemp(pattern)) throw std::runtime_error(std::string("mkdtemp: ") + std::strerror(errno));
      dir = pattern;
    }
    std::filesystem::create_directories(dir);
    pid_dir = dir;
    spec = (std::filesystem::path(dir) / "cluster.json").string();
    std::vector<std::pair<std::string, int>> jobs{{"worker", workers}};
    if (ps > 0) jobs.push_back({"ps", ps});
    if (spares > 0) jobs.push_back({"spare", spares});
    std::ofstream(spec) << troupe::local_cluster_json(jobs) << "\n";
    if (tls) spec = troupe::make_cluster_certificates(spec, (std::filesystem::path(dir) / "tls").string());
    std::printf("troupe-launch: %d ps and %d worker task(s), spec %s\n", ps, workers, spec.c_str());

    for (int k = 0; k < ps; ++k)
      all.push_back(spawn("ps:" + std::to_string(k),
                          {node_binary(node), "--cluster", spec, "--task", "ps:" + std::to_string(k)}));
    for (int k = 0; k < spares; ++k)
      all.push_back(spawn("spare:" + std::to_string(k),
                          {node_binary(node), "--cluster", spec, "--task", "spare:" + std::to_string(k)}));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    for (;;) {
      pump(all, 50);
      bool up = true;
      for (auto& p : all) {
        if (p.exit_code) throw std::runtime_error(p.task + " exited with " + std::to_string(*p.exit_code) + " before it listened");
        up = up && p.started;
      }
      if (up) break;
      if (stop_requested) throw std::runtime_error("stopped before the ps tasks listened");
      if (std::chrono::steady_clock::now() > deadline) throw std::runtime_error("the ps tasks did not listen within 30 s");
    }
    for (int k = 0; k < workers; ++k) {
      std::vector<std::string> argv = command;
      if (backup_workers >= 0) {
        argv.push_back("--backup-workers");
        argv.push_back(std::to_string(backup_workers));
      }
      for (auto a : {"--cluster", spec.c_str(), "--task"}) argv.push_back(a);
      argv.push_back("worker:" + std::to_string(k));
      all.push_back(spawn("worker:" + std::to_string(k), argv));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-launch: %s\n", e.what());
    stop(all);
    if (own_dir) std::filesystem::remove_all(dir);
    return 1;
  }

  std::string failure;
  std::map<std::string, int> restarts;  // per task
  std::set<std::string> gone;           // tasks dead for good, the job going on without them
  std::size_t handed_over = 0;          // ps tasks left to spares
  std::optional<HealthProbe> probe;
  // A hung task is worth finding only where something starts it again.
  if (hang_timeout < 0) hang_timeout = restart_ps > 0 || restart_workers > 0 ? 10 : 0;
  if (hang_timeout > 0)
    probe.emplace(troupe::ClusterSpec::from_file(spec), std::chrono::milliseconds(1000));
  for (;;) {
    pump(all, 100);
    bool workers_running = false;
    for (auto& p : all) {
      const bool is_worker = p.task.rfind("worker:", 0) == 0;
      if (is_worker && !p.exit_code) workers_running = true;
      if (probe && !p.exit_code)
        if (auto silent = probe->silent_for(p.task); silent && *silent > hang_timeout) {
          std::fprintf(stderr, "troupe-launch: %s (pid %d) has not answered for %.1f s (stopped or hung): killing it\n",
                       p.task.c_str(), int(p.pid), *silent);
          ::kill(-p.pid, SIGKILL);
          ::kill(-p.pid, SIGCONT);  // a stopped process dies only once it runs
          probe->forget(p.task);
        }
      const int limit = is_worker ? restart_workers : restart_ps;
      const bool failed = p.exit_code && (!is_worker || *p.exit_code != 0);
      if (failed && failure.empty() && restarts[p.task] < limit && !stop_requested) {
        const int code = *p.exit_code;
        const std::string signal = code > 128 ? " (signal " + std::to_string(code - 128) + ")" : "";
        std::fprintf(stderr, "troupe-launch: %s (pid %d) exited with %d%s while the %s ran: starting it again (%d of %d)\n",
                     p.task.c_str(), int(p.pid), code, signal.c_str(), is_worker ? "job" : "workers", ++restarts[p.task],
                     limit);
        if (p.out >= 0) ::close(p.out);
        std::vector<std::string> argv = p.argv;
        if (is_worker && std::find(argv.begin(), argv.end(), "--rejoin") == argv.end()) argv.push_back("--rejoin");
        try {
          p = spawn(p.task, argv);
          if (is_worker) workers_running = true;
        } catch (const std::exception& e) {
          failure = e.what();
        }
        if (probe) probe->forget(p.task);
        continue;
      }
      // A ps task that stays dead is a spare's to take over, while spares last; a spare that
      // dies is one fewer.
      if (!is_worker && p.exit_code && !gone.count(p.task) && failure.empty()) {
        const bool spare = p.task.rfind("spare:", 0) == 0;
        // The chief gives lost tasks to the spares in order: the first handed_over ones serve a
        // ps task now, and such a one dying loses that task for good.
        if (spare && std::stoi(p.task.substr(6)) < int(handed_over)) {
          failure = p.task + ", which took over a lost ps task, exited with " + std::to_string(*p.exit_code) +
                    ": that task is lost for good";
          continue;
        }
        if (spare || int(handed_over) < spares) {
          gone.insert(p.task);
          if (!spare) ++handed_over;
          std::fprintf(stderr, "troupe-launch: %s (pid %d) exited with %d while the workers ran%s\n", p.task.c_str(),
                       int(p.pid), *p.exit_code,
                       spare ? ": one spare fewer" : ": not started again; a spare takes it over (the chief's supervisor)");
          continue;
        }
      }
      if (!is_worker && p.exit_code && !gone.count(p.task) && failure.empty())
        failure = p.task + " exited with " + std::to_string(*p.exit_code) + " while the workers ran";
      // A failed worker fails the job at once: the others may be waiting for it (a synchronous
      // step, the chief's initialisation) and would wait until their deadlines.
      if (is_worker && p.exit_code && *p.exit_code != 0 && failure.empty())
        failure = p.task + " exited with " + std::to_string(*p.exit_code);
    }
    if (!workers_running || !failure.empty() || stop_requested) break;
  }
  if (stop_requested && failure.empty()) failure = "stopped by a signal";
  stop(all);
  progress_display.clear();
  progress_display.flush();
  if (own_dir) std::filesystem::remove_all(dir);
  for (auto& p : all)
    if (p.task.rfind("worker:", 0) == 0 && p.exit_code != 0 && failure.empty())
      failure = p.task + " exited with " + std::to_string(*p.exit_code);
  if (!failure.empty()) {
    std::fprintf(stderr, "troupe-launch: the job failed: %s\n", failure.c_str());
    return 1;
  }
  std::printf("troupe-launch: every worker finished\n");
  return 0;
}
