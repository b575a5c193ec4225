#pragma once
// Where this process is: the cluster it belongs to and its task there, or alone. Every program
// of a job reads it the same way (troupe-node, troupe-fashion-mnist, a program of one's own):
//
//   auto where = train::where_am_i(cluster_flag, task_flag);   // --cluster FILE --task JOB:I
//   if (where.local()) ... one process ... else ... where.spec(), where.task() ...
//
// The spec and the task come from, in this order:
//   1. --cluster FILE (the cluster spec, TF_CONFIG's JSON form: actors/cluster/cluster_spec.hpp)
//      with --task JOB:I, or with the file's own "task" when no --task is given;
//   2. the TF_CONFIG environment variable (TensorFlow's {"cluster": {...}, "task": {"type":
//      "worker", "index": 1}}), whose task --task may name instead;
//   3. neither: the process runs alone (local()).
// Refused with invalid_argument, naming what is wrong: a --task with no spec to find it in, a
// spec that says no task for this process, a task the spec lacks (naming the tasks it has), and
// a malformed spec (naming the file or TF_CONFIG and the entry).
#include <optional>
#include <string>

#include "actors/cluster/cluster_spec.hpp"

namespace troupe::train {

class ClusterConfig {
 public:
  ClusterConfig() = default;  // alone
  ClusterConfig(ClusterSpec spec, TaskId task, std::string source);

  bool local() const { return !spec_.has_value(); }
  // The spec (with this task set) and the task; only on a cluster (invalid_argument alone).
  const ClusterSpec& spec() const;
  const TaskId& task() const;
  // "worker:1", or "local" alone.
  std::string task_name() const;
  // Where the spec came from: "--cluster spec.json", "TF_CONFIG", or "" alone.
  const std::string& source() const { return source_; }

  // The tasks of the job named `job` ("worker", "ps"); 0 alone or when the spec has no such job.
  int tasks_of(const std::string& job) const;
  int num_workers() const { return local() ? 1 : tasks_of("worker"); }
  int num_ps() const { return tasks_of("ps"); }
  // This process's index among the workers (0 alone).
  int worker_index() const { return local() ? 0 : task_.index; }
  // The chief, which initialises, restores, saves and reports: alone, or worker:0.
  bool is_chief() const { return local() || (task_.job == "worker" && task_.index == 0); }

 private:
  std::optional<ClusterSpec> spec_;
  TaskId task_;
  std::string source_;
};

// Where this process is, from the values of --cluster and --task ("" for a flag not given), else
// TF_CONFIG, else alone (above).
ClusterConfig where_am_i(const std::string& cluster_file = "", const std::string& task = "");

}  // namespace troupe::train
