// troupe-launch: a cluster job in one command, on this machine or across hosts (docs/cluster.md,
// "A local cluster in one command", "Training across hosts").
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
// workers' Supervisor restores its variables from the chief's checkpoint, actors/cluster/supervisor.hpp).
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
// With --hosts HOST[:SLOTS],... (or --hostfile) the tasks run on those hosts over ssh instead of on
// loopback (launch_hosts.hpp): the ps tasks take the first slots, then the spares, then the
// workers; each host's tasks listen on --port and the ports after it; the spec (and with --tls
// each host's own certificates) is copied to the same path there; a remote task never outlives
// its ssh session. Docs: docs/cluster.md, "Training across hosts".
// Every process's pid is kept in DIR/<job>-<index>.pid on its host (for scripts that kill one). Exit code: 0
// when every worker exited with 0 and no ps task died for good, 1 otherwise, 2 for a bad command
// line.
#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
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
#include <sstream>
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
#include "apps/launch_hosts.hpp"
#include "core/error.hpp"

extern char** environ;

namespace {

volatile sig_atomic_t stop_requested = 0;
void on_stop_signal(int) { stop_requested = 1; }

// One process of the job: its task, pid, and the pipe its stdout and stderr come through.
struct Process {
  std::string task;
  std::vector<std::string> argv;  // the task's program and arguments (not ssh's)
  std::string host;               // where ssh started it; "" for this machine
  pid_t pid = -1;                 // the task's, or its ssh session's
  int in = -1;                    // remote: the write end of the session's input (launch_hosts.hpp)
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

std::string pid_dir;  // where DIR/<job>-<index>.pid files go (on each task's host)

// How tasks on other hosts are started: the ssh command, the directory to start in, what is set
// in their environment.
struct RemoteStart {
  std::vector<std::string> ssh{"ssh"};
  std::string cwd;
  std::vector<std::string> env;  // NAME=VALUE
} remote;

Process spawn(const std::string& task, std::vector<std::string> argv, const std::string& host = "") {
  const std::vector<std::string> given = argv;
  int input[2] = {-1, -1};
  if (!host.empty()) {
    argv = troupe::launch::ssh_command(remote.ssh, host,
                                       troupe::launch::remote_task_script(task, argv, pid_dir, remote.cwd, remote.env));
    if (::pipe2(input, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  }
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error(std::string("pipe: ") + std::strerror(errno));
  // A process group of its own: stopping the task stops what it started too, and a terminal's
  // Ctrl-C reaches only troupe-launch, which stops the tasks in order.
  Process p;
  p.task = task;
  try {
    p.pid = troupe::launch::spawn_in_group(argv, input[0], fds[1], " for " + task);
  } catch (...) {
    for (int fd : {fds[0], fds[1], input[0], input[1]})
      if (fd >= 0) ::close(fd);
    throw;
  }
  ::close(fds[1]);
  if (input[0] >= 0) ::close(input[0]);
  p.out = fds[0];
  p.in = input[1];
  p.argv = given;
  p.host = host;
  if (host.empty())  // a remote task's script writes its own, on its host
    std::ofstream(std::filesystem::path(pid_dir) / (troupe::launch::file_stem(task) + ".pid")) << p.pid << "\n";
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
    if (::waitpid(p.pid, &status, WNOHANG) == p.pid) {
      p.exit_code = troupe::launch::exit_code_of(status);
      if (p.in >= 0) ::close(p.in), p.in = -1;
    }
  }
}

// Asks a task to stop: SIGTERM to its process group here; on another host, the end of its
// session's input (its watchdog sends SIGTERM, and SIGKILL 10 s later).
void terminate(Process& p) {
  if (p.in >= 0) ::close(p.in), p.in = -1;
  else if (p.host.empty()) ::kill(-p.pid, SIGTERM);
}

// Kills a task at once (a hung one): SIGKILL (and SIGCONT, for a stopped one) to its process
// group here, or "kill" to its watchdog on another host.
void kill_now(Process& p) {
  if (!p.host.empty()) {
    if (p.in >= 0 && ::write(p.in, "kill\n", 5) == 5) return;
    ::kill(-p.pid, SIGKILL);  // the session is gone or stuck: ending it ends the task too
    return;
  }
  ::kill(-p.pid, SIGKILL);
  ::kill(-p.pid, SIGCONT);  // a stopped process dies only once it runs
}

// Asks every process still running to stop (terminate), then SIGKILLs those still running 10 s
// later (15 s for tasks on other hosts, whose watchdogs kill them at 10 s).
void stop(std::vector<Process>& all) {
  bool any_remote = false;
  for (auto& p : all)
    if (!p.exit_code) {
      terminate(p);
      any_remote = any_remote || !p.host.empty();
    }
  const int bound_s = any_remote ? 15 : 10;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(bound_s);
  auto running = [&] {
    for (auto& p : all)
      if (!p.exit_code) return true;
    return false;
  };
  while (running() && std::chrono::steady_clock::now() < deadline) pump(all, 50);
  for (auto& p : all)
    if (!p.exit_code) {
      std::fprintf(stderr, "troupe-launch: %s (pid %d%s%s) did not stop within %d s: killing it\n", p.task.c_str(),
                   int(p.pid), p.host.empty() ? "" : ", the ssh session to ", p.host.c_str(), bound_s);
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
  CLI::App app{"troupe-launch: a cluster job in one command, on this machine or across hosts over ssh"};
  int ps = 1, workers = 1;
  int backup_workers = -1;
  int restart_ps = 0, restart_workers = 0;
  double hang_timeout = -1;
  std::string node, dir;
  std::vector<std::string> command;
  app.add_option("--ps", ps, "parameter-server tasks (troupe-node)")->check(troupe::cli::non_negative)->capture_default_str();
  auto* workers_option = app.add_option("--workers", workers,
                                        "worker tasks (the command); with --hosts: default, the slots the ps tasks "
                                        "and spares leave")
                             ->check(troupe::cli::positive)
                             ->capture_default_str();
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
  std::string hosts_text, hostfile, ssh_text = "ssh";
  int base_port = 2222;
  std::vector<std::string> env_given;
  app.add_option("--hosts", hosts_text,
                 "run the tasks on these hosts over ssh, HOST[:SLOTS],... (1 slot by default): the ps tasks take the "
                 "first slots, then the spares, then the workers (worker:0, the chief, the first worker slot)")
      ->group("Across hosts");
  app.add_option("--hostfile", hostfile, "the hosts, one per line: HOST, HOST:SLOTS or HOST slots=SLOTS")
      ->group("Across hosts")
      ->excludes("--hosts");
  app.add_option("--ssh", ssh_text,
                 "the command that reaches a host, split at spaces (e.g. \"ssh -i key -p 2200\"); BatchMode, a 10 s "
                 "connect bound and keep-alives are added")
      ->capture_default_str()
      ->group("Across hosts");
  app.add_option("--port", base_port, "the port of a host's first task; its next tasks take the next ports")
      ->check(CLI::Range(1, 65535))
      ->capture_default_str()
      ->group("Across hosts");
  app.add_option("-x,--env", env_given,
                 "NAME or NAME=VALUE: set in every remote task's environment (TROUPE_* variables are passed on "
                 "anyway)")
      ->group("Across hosts");
  app.add_option("--node", node, "the troupe-node program (default: beside troupe-launch; on every host at that path)");
  app.add_option("--dir", dir,
                 "where the cluster spec is written (default: a new directory under /tmp, removed at the end); with "
                 "--hosts the same path on every host");
  app.add_option("command", command, "the worker's command, after --; each worker gets --cluster SPEC --task worker:K")
      ->required();
  CLI11_PARSE(app, argc, argv);

  struct sigaction stop_action{};
  stop_action.sa_handler = on_stop_signal;
  sigaction(SIGINT, &stop_action, nullptr);
  sigaction(SIGTERM, &stop_action, nullptr);
  ::signal(SIGPIPE, SIG_IGN);  // a remote task's session that ended is seen by its exit, not by a write

  std::vector<troupe::launch::Host> hosts;
  try {
    if (!hosts_text.empty()) hosts = troupe::launch::parse_hosts(hosts_text);
    if (!hostfile.empty()) hosts = troupe::launch::read_hostfile(hostfile);
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "troupe-launch: %s\n", e.what());
    return 2;
  }
  if (!hosts.empty() && workers_option->count() == 0) {
    int slots = 0;
    for (auto& h : hosts) slots += h.slots;
    workers = slots - ps - spares;
    if (workers < 1) {
      std::fprintf(stderr, "troupe-launch: the hosts have %d slot(s), all taken by the ps tasks and spares: give more "
                   "hosts or HOST:SLOTS\n", slots);
      return 2;
    }
  }
  remote.ssh.clear();
  for (std::istringstream words(ssh_text); words >> ssh_text;) remote.ssh.push_back(ssh_text);
  if (remote.ssh.empty()) {
    std::fprintf(stderr, "troupe-launch: --ssh: no command given\n");
    return 2;
  }
  remote.cwd = std::filesystem::current_path().string();
  for (char** e = environ; *e; ++e)
    if (std::string(*e).rfind("TROUPE_", 0) == 0) remote.env.push_back(*e);
  for (auto& e : env_given) {
    if (e.find('=') != std::string::npos) {
      remote.env.push_back(e);
    } else if (const char* value = std::getenv(e.c_str())) {
      remote.env.push_back(e + "=" + value);
    } else {
      std::fprintf(stderr, "troupe-launch: --env %s: it is not set here; give %s=VALUE\n", e.c_str(), e.c_str());
      return 2;
    }
  }
  std::map<std::string, std::string> host_of;  // task -> host, with --hosts

  std::vector<Process> all;
  bool own_dir = false;  // made here: removed at the end, here and on the hosts
  std::string spec;
  auto remove_dir = [&] {
    if (!own_dir) return;
    std::vector<std::string> names;
    for (auto& h : hosts) names.push_back(h.name);
    if (!names.empty()) troupe::launch::remove_from_hosts(remote.ssh, names, dir, std::chrono::seconds(15));
    std::filesystem::remove_all(dir);
  };
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
    std::vector<std::pair<std::string, int>> jobs;  // in the order they take the hosts' slots
    if (ps > 0) jobs.push_back({"ps", ps});
    if (spares > 0) jobs.push_back({"spare", spares});
    jobs.push_back({"worker", workers});
    if (hosts.empty()) {
      std::ofstream(spec) << troupe::local_cluster_json(jobs) << "\n";
    } else {
      nlohmann::json cluster = nlohmann::json::object();
      for (auto& [task, address] : troupe::launch::place_tasks(hosts, jobs, base_port)) {
        const std::string job = task.substr(0, task.find(':'));
        if (!cluster.contains(job)) cluster[job] = nlohmann::json::array();
        cluster[job].push_back(address);
        host_of[task] = address.substr(0, address.rfind(':'));
      }
      std::ofstream(spec) << nlohmann::json{{"cluster", cluster}}.dump() << "\n";
    }
    if (tls) spec = troupe::make_cluster_certificates(spec, (std::filesystem::path(dir) / "tls").string());
    std::printf("troupe-launch: %d ps and %d worker task(s), spec %s\n", ps, workers, spec.c_str());
    if (!hosts.empty()) {
      // Each host gets the spec and, with TLS, the CA and its own tasks' certificates and keys
      // (never ca.key), at the same path as here.
      std::map<std::string, std::vector<std::string>> files;
      for (auto& [task, host] : host_of) {
        auto& list = files[host];
        if (list.empty()) list = tls ? std::vector<std::string>{"tls/cluster.json", "tls/ca.pem"}
                                     : std::vector<std::string>{"cluster.json"};
        if (tls) {
          list.push_back("tls/" + troupe::launch::file_stem(task) + ".pem");
          list.push_back("tls/" + troupe::launch::file_stem(task) + ".key");
        }
      }
      std::string where;
      for (auto& [task, host] : host_of) where += (where.empty() ? "" : ", ") + task + " on " + host;
      std::printf("troupe-launch: %s\n", where.c_str());
      troupe::launch::copy_to_hosts(remote.ssh, files, dir, std::chrono::seconds(30));
    }
    auto host = [&](const std::string& task) { return host_of.count(task) ? host_of[task] : std::string(); };

    for (int k = 0; k < ps; ++k)
      all.push_back(spawn("ps:" + std::to_string(k),
                          {node_binary(node), "--cluster", spec, "--task", "ps:" + std::to_string(k)},
                          host("ps:" + std::to_string(k))));
    for (int k = 0; k < spares; ++k)
      all.push_back(spawn("spare:" + std::to_string(k),
                          {node_binary(node), "--cluster", spec, "--task", "spare:" + std::to_string(k)},
                          host("spare:" + std::to_string(k))));
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
      all.push_back(spawn("worker:" + std::to_string(k), argv, host("worker:" + std::to_string(k))));
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "troupe-launch: %s\n", e.what());
    stop(all);
    remove_dir();
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
          kill_now(p);
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
        if (p.in >= 0) ::close(p.in);
        std::vector<std::string> argv = p.argv;
        if (is_worker && std::find(argv.begin(), argv.end(), "--rejoin") == argv.end()) argv.push_back("--rejoin");
        try {
          p = spawn(p.task, argv, p.host);
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
  remove_dir();
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
