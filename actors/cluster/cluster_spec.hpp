#pragma once
// A cluster spec: which jobs there are, the address of each of their tasks, and (optionally)
// which task this process is. The form is TensorFlow's TF_CONFIG:
//   {"cluster": {"chief": ["host:port"], "worker": ["host:port", ...], "ps": [...]},
//    "task": {"type": "worker", "index": 0}}
// (a job may also list its tasks as {"0": "host:port", "2": "host:port"}, leaving indexes out).
// Every check names the bad entry: a duplicate address (with both tasks), a job name that
// cannot appear in a device name, a port that is not a number from 1 to 65535, a task of a job
// the spec lacks or an index out of range, and any key that is not one of TF_CONFIG's (a typo).
// An optional "tls" section makes every connection of the cluster mutual TLS (docs/cluster.md,
// "Only members get in (mutual TLS)"):
//   "tls": {"ca": "ca.pem",
//           "tasks": {"ps:0": {"certificate": "ps-0.pem", "key": "ps-0.key"}, ...},
//           "client": {"certificate": "client.pem", "key": "client.key"}}
// every task needs an entry; "client" is the identity of processes that are no task (troupe-node
// --status, troupe-launch's probe). Relative paths are relative to the spec file's directory
// (the working directory for TF_CONFIG). The files are read only by the process that uses them.
// Plain data: copyable, thread-safe to read.
#include <compare>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "actors/network.hpp"

namespace troupe {

struct TaskAddress {
  std::string host;  // a name, an IPv4 address, or an IPv6 address without brackets
  uint16_t port = 0;
  std::string to_string() const;  // "host:port", "[::1]:port" for IPv6
  friend bool operator==(const TaskAddress&, const TaskAddress&) = default;
};

// "host:port" or "[v6]:port"; `where` prefixes errors (invalid_argument).
TaskAddress parse_task_address(const std::string& text, const std::string& where);

struct TaskId {
  std::string job;
  int index = 0;
  std::string to_string() const;  // "worker:0"
  friend auto operator<=>(const TaskId&, const TaskId&) = default;
};

// "worker:0" (also TensorFlow's "/job:worker/task:0" and "/job:worker/replica:0/task:0"); throws
// invalid_argument naming the text.
TaskId parse_task_id(const std::string& text);

// The first way two specs' agreement() lines differ, naming whose spec says what ("worker:1 is at
// 10.0.0.2:2222 in worker:0's spec and at 10.0.0.3:2222 in ps:0's"; "ps:1 at ... is only in
// ps:0's"); empty when they agree.
std::string first_difference(const std::vector<std::string>& a, const std::string& whose_a,
                             const std::vector<std::string>& b, const std::string& whose_b);

// `count` distinct TCP ports nothing listens on now on 127.0.0.1, picked by the OS (held open
// together, so they differ); a process started on one right away races only with other
// programs binding ports at that moment. Throws unavailable when none can be had.
std::vector<uint16_t> free_loopback_ports(int count);

// The spec of a cluster on the local host, in TF_CONFIG's JSON form: each job of `jobs` (name,
// tasks) with its tasks on free loopback ports, e.g. {"cluster": {"ps": ["127.0.0.1:41233"], ...}}.
std::string local_cluster_json(const std::vector<std::pair<std::string, int>>& jobs);

class ClusterSpec {
 public:
  // `where` names the source in errors ("spec.json", "TF_CONFIG").
  // `base_dir`: what relative paths of the "tls" section are relative to ("": the working directory).
  static ClusterSpec from_json(const std::string& text, const std::string& where, const std::string& base_dir = "");
  static ClusterSpec from_file(const std::string& path);
  // The spec in TF_CONFIG; nullopt when the variable is unset or empty.
  static std::optional<ClusterSpec> from_environment();

  // Jobs by name; each job's tasks by index (a sparse job leaves indexes out).
  const std::map<std::string, std::map<int, TaskAddress>>& jobs() const { return jobs_; }
  std::vector<TaskId> tasks() const;  // every task, by job then index
  bool has(const TaskId& task) const;
  // The address of `task`; throws invalid_argument naming the task and what the spec has.
  const TaskAddress& address(const TaskId& task) const;
  // The task this process is ("task" in TF_CONFIG), if the spec says.
  const std::optional<TaskId>& this_task() const { return this_task_; }
  // Checks that `task` is in the spec (throws invalid_argument naming the jobs and indexes there
  // are) and makes it this process's task.
  void set_this_task(const TaskId& task);

  // Whether the spec has a "tls" section.
  bool uses_tls() const { return !tls_ca_.empty(); }
  // The TLS identity of `task` (empty without a "tls" section).
  TlsFiles tls_for(const TaskId& task) const;
  // The identity of a process that is no task; empty without a "tls" section; throws
  // invalid_argument when the section has no "client".
  TlsFiles tls_client() const;

  // What every process of a cluster must agree on, as sorted lines: each task and its address
  // ("worker:1 10.0.0.2:2222"), and whether the cluster uses TLS (the files' paths may differ
  // from host to host). Members compare them when they connect (the "spec check").
  std::vector<std::string> agreement() const;

 private:
  std::string where_;
  std::map<std::string, std::map<int, TaskAddress>> jobs_;
  std::optional<TaskId> this_task_;
  std::string tls_ca_;
  std::map<TaskId, std::pair<std::string, std::string>> tls_tasks_;  // certificate, key
  std::optional<std::pair<std::string, std::string>> tls_client_;
};

}  // namespace troupe
