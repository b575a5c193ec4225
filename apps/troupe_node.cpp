// troupe-node: one process of a Troupe cluster (docs/cluster.md).
//   troupe-node --cluster spec.json --task worker:0 [--threads N]
//   TF_CONFIG='{"cluster": ..., "task": {"type": "worker", "index": 0}}' troupe-node
//   troupe-node --make-certs DIR --cluster spec.json    (a CA and certificates: DIR/cluster.json)
//   troupe-node --status HOST:PORT [--cluster spec.json] (the spec for its TLS client identity)
// Publishes the task's worker on the task's address from the spec, runs the partitions masters
// register with it and holds the variables placed on it, logs one line per event (started, peer
// connected, partition registered, peer lost, stopping, stopped), and
// stops cleanly on SIGTERM or SIGINT. Exit codes: 0 stopped by a signal, 1 could not start
// (a port in use), 2 a bad spec or command line.
#include <CLI/CLI.hpp>

#include <csignal>
#include <cstdio>
#include <ctime>
#include <optional>
#include <pthread.h>
#include <string>

#include "actors/cluster/member.hpp"
#include "actors/cluster/tls.hpp"
#include "apps/cli_checks.hpp"
#include "train/cluster_config.hpp"
#include "core/error.hpp"
#include "devices/cpu_threads.hpp"

namespace {

// "2026-11-23T20:58:01Z troupe-node worker:0: ..."
void log_line(const std::string& who, const std::string& what) {
  char stamp[32];
  std::time_t now = std::time(nullptr);
  std::strftime(stamp, sizeof stamp, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
  std::printf("%s troupe-node %s: %s\n", stamp, who.c_str(), what.c_str());
  std::fflush(stdout);
}

}  // namespace

// troupe-node --status HOST:PORT: every task's steps in flight; 1 when HOST:PORT does not answer.
int print_status(const std::string& address, const std::string& cluster_file) {
  try {
    const auto at = troupe::parse_task_address(address, "--status");
    troupe::MemberOptions options;
    if (!cluster_file.empty()) options.tls = troupe::ClusterSpec::from_file(cluster_file).tls_client();
    const troupe::ClusterStatus status = troupe::cluster_status(at, std::chrono::seconds(5), options);
    for (auto& sentence : status.stuck) std::printf("stuck: %s\n", sentence.c_str());
    for (auto& task : status.tasks) {
      std::printf("%s at %s: ", task.task.c_str(), task.address.c_str());
      if (!task.error.empty()) std::printf("%s\n", task.error.c_str());
      else if (task.lines.empty()) std::printf("no step in flight\n");
      else std::printf("\n");
      for (auto& line : task.lines) std::printf("  %s\n", line.c_str());
    }
    return 0;
  } catch (const troupe::Error& e) {
    std::fprintf(stderr, "troupe-node --status: %s\n", e.what());
    return 1;
  }
}

int main(int argc, char** argv) {
  troupe::bound_openmp_spinning(argv);  // several nodes may share a host's cores
  CLI::App app{"troupe-node: one process (task) of a Troupe cluster"};
  std::string cluster_file, task_text;
  int threads = 0;
  app.add_option("--cluster", cluster_file, "cluster spec (JSON, TF_CONFIG's form); default: $TF_CONFIG")
      ->check(CLI::ExistingFile);
  app.add_option("--task", task_text, "this process's task, job:index (default: the spec's \"task\")");
  app.add_option("--threads", threads, "threads that compute at once (default: the cores this process may use)")
      ->check(troupe::cli::non_negative);
  double variable_memory_mb = 0;
  app.add_option("--variable-memory-mb", variable_memory_mb,
                 "the memory this task's variables and optimizer slots may take, in MiB (0: no limit); a variable "
                 "that does not fit fails its initializer naming it")
      ->check(troupe::cli::non_negative)
      ->capture_default_str();
  std::string status_of;
  app.add_option("--status", status_of,
                 "print what every task of the cluster at HOST:PORT is running (each step in flight, its waiting "
                 "nodes and what they wait for), then exit")
      ->excludes("--task");
  std::string certs_dir;
  app.add_option("--make-certs", certs_dir,
                 "make a CA for the cluster of --cluster and a certificate and key for each of its tasks and for "
                 "clients in DIR, and write DIR/cluster.json: the spec with its \"tls\" section, then exit")
      ->excludes("--task")
      ->excludes("--status");
  std::string trace_file, trace_steps = "10-12";
  app.add_option("--trace", trace_file,
                 "write a Chrome trace of this task's share of the steps --trace-steps (numbered by the session that "
                 "runs them) here, again after each; steps a session traces itself go to its trace instead");
  app.add_option("--trace-steps", trace_steps, "the steps traced, A-B")->capture_default_str();
  CLI11_PARSE(app, argc, argv);
  if (!status_of.empty()) return print_status(status_of, cluster_file);
  const auto trace_range = troupe::cli::step_range(trace_steps);
  if (!trace_range) {
    std::fprintf(stderr, "troupe-node: --trace-steps: '%s' is not a range of steps A-B (1 <= A <= B)\n", trace_steps.c_str());
    return 2;
  }
  if (!certs_dir.empty()) {
    if (cluster_file.empty()) {
      std::fprintf(stderr, "troupe-node --make-certs: give the cluster's spec with --cluster\n");
      return 2;
    }
    try {
      const std::string spec = troupe::make_cluster_certificates(cluster_file, certs_dir);
      std::printf("wrote a cluster CA and a certificate per task and for clients in %s; the spec with them: %s\n",
                  certs_dir.c_str(), spec.c_str());
      return 0;
    } catch (const troupe::Error& e) {
      std::fprintf(stderr, "troupe-node --make-certs: %s\n", e.what());
      return 1;
    }
  }

  // SIGTERM and SIGINT are taken by sigwait below, in this thread; every thread started from
  // here on inherits the mask, so no other thread is interrupted by them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);

  troupe::ClusterSpec spec;
  troupe::TaskId task;
  try {
    const troupe::train::ClusterConfig where = troupe::train::where_am_i(cluster_file, task_text);
    if (where.local()) {
      std::fprintf(stderr, "troupe-node: no cluster spec: give --cluster FILE or set TF_CONFIG\n");
      return 2;
    }
    spec = where.spec();
    task = where.task();
  } catch (const troupe::Error& e) {
    std::fprintf(stderr, "troupe-node: %s\n", e.what());
    return 2;
  }

  std::optional<troupe::ClusterMember> member;
  try {
    const std::string who = task.to_string();
    troupe::MemberOptions options;
    options.threads = threads;
    options.variable_memory_bytes = int64_t(variable_memory_mb * 1024 * 1024);
    options.tls = spec.tls_for(task);
    options.trace.file = trace_file;
    options.trace.first_step = uint64_t(trace_range->first);
    options.trace.last_step = uint64_t(trace_range->second);
    options.log = [who](const std::string& line) { log_line(who, line); };
    member.emplace(spec, task, options);
  } catch (const troupe::Error& e) {
    std::fprintf(stderr, "troupe-node: %s\n", e.what());
    return 1;
  }
  log_line(task.to_string(), fmt::format("started on {} (incarnation {:#x}, devices {}{})", member->address().to_string(),
                                         member->incarnation(), member->devices(),
                                         spec.uses_tls() ? "; mutual TLS, certificate " + spec.tls_for(task).certificate : ""));
  int signal = 0;
  sigwait(&stop_signals, &signal);
  log_line(task.to_string(), std::string("stopping on ") + (signal == SIGINT ? "SIGINT" : "SIGTERM"));
  member.reset();
  log_line(task.to_string(), "stopped");
  return 0;
}
