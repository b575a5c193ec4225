#include "train/cluster_config.hpp"

#include "core/error.hpp"

namespace troupe::train {

ClusterConfig::ClusterConfig(ClusterSpec spec, TaskId task, std::string source)
    : spec_(std::move(spec)), task_(std::move(task)), source_(std::move(source)) {
  spec_->set_this_task(task_);  // throws naming the tasks the spec has
}

const ClusterSpec& ClusterConfig::spec() const {
  if (!spec_) fail(ErrorCode::invalid_argument, "this process runs alone: it has no cluster spec");
  return *spec_;
}

const TaskId& ClusterConfig::task() const {
  if (!spec_) fail(ErrorCode::invalid_argument, "this process runs alone: it has no task of a cluster");
  return task_;
}

std::string ClusterConfig::task_name() const { return local() ? "local" : task_.to_string(); }

int ClusterConfig::tasks_of(const std::string& job) const {
  if (!spec_) return 0;
  auto it = spec_->jobs().find(job);
  return it == spec_->jobs().end() ? 0 : int(it->second.size());
}

ClusterConfig where_am_i(const std::string& cluster_file, const std::string& task) {
  std::optional<ClusterSpec> spec;
  std::string source;
  if (!cluster_file.empty()) {
    spec = ClusterSpec::from_file(cluster_file);
    source = "--cluster " + cluster_file;
  } else if ((spec = ClusterSpec::from_environment())) {
    source = "TF_CONFIG";
  }
  if (!spec) {
    if (!task.empty())
      fail(ErrorCode::invalid_argument,
           "--task {}: there is no cluster spec to find it in: give --cluster FILE or set TF_CONFIG", task);
    return {};
  }
  // TensorFlow's job names that Troupe has no task for: a chief of its own would never be asked
  // to initialise (the chief is worker:0), and nothing would run an evaluator's task.
  for (const char* job : {"chief", "master", "evaluator"})
    if (spec->jobs().count(job))
      fail(ErrorCode::invalid_argument,
           "{} has a job '{}', which Troupe does not run: worker:0 is the chief, so list the chief's address first "
           "under \"worker\" (a TFJob: Worker replicas only, no Chief{}){}",
           source, job, std::string(job) == "evaluator" ? " or Evaluator" : "",
           std::string(job) == "evaluator" ? "; the chief evaluates (train::EvaluationHook)" : "");
  std::optional<TaskId> me;
  if (!task.empty()) me = parse_task_id(task);
  else me = spec->this_task();
  if (!me)
    fail(ErrorCode::invalid_argument,
         "{}: which task is this process? give --task JOB:INDEX, or a \"task\" in the spec ({{\"type\": \"worker\", "
         "\"index\": 0}})",
         source);
  try {
    return ClusterConfig(std::move(*spec), *me, source);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("{}: {}", source, e.what()));
  }
}

}  // namespace troupe::train
