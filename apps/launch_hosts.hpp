#pragma once
// troupe-launch across hosts (docs/cluster.md, "Training across hosts"): the hosts and their
// slots (--hosts, --hostfile), which task runs where, and the ssh command lines that start a task
// on its host, copy the job's files there and remove them at the end.
//
// A remote task runs under a small POSIX shell script on its host (remote_task_script): the
// program in the background, its pid written to DIR/<job>-<index>.pid there, and a watchdog that
// reads the ssh session's standard input. troupe-launch holds the write end: a line "kill" makes
// the watchdog SIGKILL the task (a hung one); end of input (troupe-launch closing it, or dying,
// or the connection dropping) makes it SIGTERM the task and SIGKILL it 10 s later. So a remote
// task never outlives its ssh session, and ssh's exit status is the task's.
#include <sys/types.h>

#include <chrono>
#include <map>
#include <string>
#include <vector>

namespace troupe::launch {

struct Host {
  std::string name;  // as ssh reaches it and as the spec names it
  int slots = 1;     // tasks it runs
};

// "a:2,b,c:1" (a host's slots default to 1); throws std::invalid_argument naming the entry.
std::vector<Host> parse_hosts(const std::string& text);
// One host per line, "HOST", "HOST:SLOTS" or "HOST slots=SLOTS" (mpirun's form); '#' starts a
// comment. Throws std::invalid_argument naming the file and the line.
std::vector<Host> read_hostfile(const std::string& path);

// The task of each job in `jobs` (in order, e.g. ps, spare, worker) placed on the hosts' slots in
// order, each host's tasks on consecutive ports from `base_port`: task name -> "host:port".
// Throws std::invalid_argument when the tasks outnumber the slots.
std::vector<std::pair<std::string, std::string>> place_tasks(const std::vector<Host>& hosts,
                                                             const std::vector<std::pair<std::string, int>>& jobs,
                                                             int base_port);

// How a task names its files: "ps:1" -> "ps-1" (DIR/ps-1.pid; tls/ps-1.pem, as troupe-node
// --make-certs names them).
std::string file_stem(const std::string& task);

// Starts `argv` (PATH searched) in a process group of its own (stopping it stops what it starts),
// with `in` as its standard input (-1: this process's) and `out` as its standard output and
// error. Throws std::runtime_error "cannot start PROGRAM`what`: why".
pid_t spawn_in_group(const std::vector<std::string>& argv, int in, int out, const std::string& what = "");

// A waitpid status as an exit code: the process's own, or 128 + the signal that ended it.
int exit_code_of(int status);

// `text` quoted for a POSIX shell.
std::string shell_quote(const std::string& text);

// The script the host's shell runs for `task` (above): in `cwd` if it exists there (else the
// login directory), with `env` (NAME=VALUE) set, its pid in `dir`.
std::string remote_task_script(const std::string& task, const std::vector<std::string>& argv, const std::string& dir,
                               const std::string& cwd, const std::vector<std::string>& env);

// `ssh` (the user's ssh command, split at spaces) with the options every call adds: no password
// prompt (BatchMode), a connect bound, keep-alives that end a session to a host that went away
// within 15 s; then the host and the remote command. The user's options come first, so they win.
std::vector<std::string> ssh_command(const std::vector<std::string>& ssh, const std::string& host,
                                     const std::string& remote_command);

// What a bounded command printed and how it ended.
struct Outcome {
  int exit_code = 0;  // 128 + signal for a signal; -1 when it ran past its bound (then killed)
  std::string output; // stdout and stderr together
};
// Runs `argv` with `input` on its standard input, at most `bound` (then SIGKILL).
Outcome run_bounded(const std::vector<std::string>& argv, const std::string& input, std::chrono::milliseconds bound);

// On every host at once, over ssh: makes `dir` and unpacks there, at the same path, the files of
// this host's `dir` each host is given (paths relative to `dir`); a host that sees this `dir`
// itself there (the launching host, or one sharing its file system) is left as it is. Throws std::runtime_error naming each host that
// could not be reached or logged into, or that failed, with ssh's words, within `bound`.
void copy_to_hosts(const std::vector<std::string>& ssh, const std::map<std::string, std::vector<std::string>>& files,
                   const std::string& dir, std::chrono::milliseconds bound);

// On every host at once: removes `dir`. Best effort, bounded; a host that fails is reported on
// stderr.
void remove_from_hosts(const std::vector<std::string>& ssh, const std::vector<std::string>& hosts,
                       const std::string& dir, std::chrono::milliseconds bound);

}  // namespace troupe::launch
