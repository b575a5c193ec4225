#pragma once
// Saver: saves a session's variables to a checkpoint and restores them (TensorFlow's
// tf.train.Saver).
//
//   Saver saver(session, {.max_to_keep = 5});
//   std::string path = saver.save("ckpt", step);        // "ckpt/ckpt-<step>"
//   if (auto latest = latest_checkpoint("ckpt")) saver.restore(*latest);
//
// What is saved: every variable of the session's graph by shared name, and for each variable
// an optimizer updates (an ApplyGradient node in the graph) that optimizer's state: its slots
// as "<variable>/<optimizer>/<slot>" (e.g. "w/momentum/accumulator", "w/adam/m", "w/adam/v";
// OptimizerSpec::slot_name) and its update count as "<variable>/<optimizer>/step", an int64
// scalar (plain SGD keeps no state and saves none). The parts of a partitioned variable
// (ops::partitioned_variable) are saved as row slices of one variable, their slots likewise,
// and their step count once. A save refuses (failed_precondition) while a variable of the
// graph is not initialised, naming it, as TensorFlow's does.
//
// How a save runs: every parameter shard snapshots its variables and slots in one message
// (sharing the buffers: the shard copies a buffer before its next update while the snapshot
// holds it), then one thread per shard writes that shard's data file into a temporary
// directory, in parallel and off the actor scheduler's threads, and the checkpoint is
// published at once (core/checkpoint.hpp: one rename; the pointer file "checkpoint" then names
// it; checkpoints beyond the newest max_to_keep are removed). save_async() returns once the
// snapshot is taken: training steps run while it writes, and the checkpoint holds the values of
// the moment of the snapshot. One save runs at a time per Saver: a second save waits until the
// one in flight has finished writing. A save that fails (a full disk, a directory that cannot
// be written) throws, leaves the published checkpoints as they were and the session as it was.
//
// On a cluster session (SessionOptions::target) the same calls save the variables the tasks
// hold: every task snapshots its own shards and writes its own data files into the
// checkpoint's temporary directory (one that every task sees: a shared filesystem on several
// hosts), in parallel, and this process writes the index and publishes with the same rename;
// a restore has every task read and verify its share first, then assign it. save_async
// returns at once there (the tasks snapshot when the request reaches them). Only the tasks that
// hold the graph's variables take part: a save or restore goes on while a task that holds none
// (a worker of a job whose variables live on ps tasks) is away. A task that fails or does not
// answer within cluster_task_timeout fails the save naming it; the format is the
// same, so a cluster's checkpoint restores into a local session and the reverse
// (actors/cluster/cluster_checkpoint.hpp, docs/cluster.md "Checkpoints on a cluster").
//
// Restore reads and verifies every tensor first (checksums, dtypes, shapes), and only then
// assigns them, all in one message per shard: a restore that fails changes no variable.
// Variables are matched by name; a split variable is assembled from whichever saved slices
// cover its rows (saved whole and restored into parts, or the reverse, or into another
// number of parts). A variable of the graph missing from the checkpoint, a dtype or shape that
// does not fit, or a corrupt file is refused with a troupe::Error naming the checkpoint's file
// and the variable (a damaged ckpt-<step> as a DamagedCheckpoint, below, which names the newest
// intact one before it); variables the checkpoint has and the graph does not are reported. Restoring
// initialises variables not yet initialised, so a resumed program need not run the
// initializers first. Restore while no step runs: a step running meanwhile may see some
// shards restored and others not.
#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/session.hpp"

namespace troupe {

struct SaverOptions {
  // Published checkpoints kept in the directory; older ones are removed after each save.
  int max_to_keep = 5;
  // A cluster session: how long each task may take to write (or read) its share of a checkpoint;
  // a task silent that long (or whose connection is lost) fails the save or restore, naming it.
  std::chrono::milliseconds cluster_task_timeout{std::chrono::minutes(2)};
};

struct RestoreReport {
  std::string path;                 // the checkpoint restored
  int64_t global_step = 0;          // the step it was saved at
  std::vector<std::string> restored;  // the names assigned (variables, slots, step counts)
  std::vector<std::string> extra;   // in the checkpoint, not in the session's graph: not restored
};

class Saver {
 public:
  explicit Saver(Session& session, SaverOptions options = {});
  ~Saver();  // waits for a save in flight
  Saver(const Saver&) = delete;
  Saver& operator=(const Saver&) = delete;

  // Saves into `dir` (created if need be) as "<dir>/ckpt-<global_step>"; returns that path.
  std::string save(const std::string& dir, int64_t global_step);
  // The same, with the step read from the variable `global_step` (ops::global_step) in the
  // same snapshot as the values saved.
  std::string save(const std::string& dir, const Output& global_step);
  // Takes the snapshot now (a refusal, such as an uninitialised variable, throws here) and
  // writes it in the background, its threads at the lowest CPU priority (nice 19) so that the
  // training steps beside it keep the cores; the future gives the published path, or the error.
  std::future<std::string> save_async(const std::string& dir, int64_t global_step);
  std::future<std::string> save_async(const std::string& dir, const Output& global_step);

  // Checks that checkpoints can be written into `dir` before training starts, as a save writes
  // them (core/checkpoint.hpp, check_writable): by this process, and on a cluster session by every
  // task that holds variables (each writes its own files). Throws naming the directory, the task
  // and errno: permission_denied (EACCES, EPERM, EROFS), resource_exhausted (ENOSPC, EDQUOT);
  // failed_precondition when a task's `dir` is not the chief's (hosts that share no file system).
  void check_directory(const std::string& dir);

  RestoreReport restore(const std::string& path);
  // A cluster session's partial restore: only the variables placed on `tasks` ("ps:1"; their
  // optimizer slots and step counts too), the others left as they are: what a restarted
  // parameter server needs (actors/cluster/supervisor.hpp). `restored` then lists those variables.
  RestoreReport restore_tasks(const std::string& path, const std::vector<std::string>& tasks);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// restore()'s error for a checkpoint whose files are damaged (data_loss): the message names the
// newest checkpoint before it in the same directory whose every byte verifies, and intact()
// gives it, what to restore instead (nullopt: none verifies).
class DamagedCheckpoint : public Error {
 public:
  DamagedCheckpoint(const Error& cause, std::optional<std::string> intact);
  const std::optional<std::string>& intact() const { return intact_; }

 private:
  std::optional<std::string> intact_;
};

// The newest checkpoint published in `dir`, or nullopt when there is none.
std::optional<std::string> latest_checkpoint(const std::string& dir);
// An older checkpoint of `dir` by name ("ckpt-400"), to restore instead of the newest (one that
// is damaged: restore's data_loss error names the newest intact checkpoint before it).
std::string named_checkpoint(const std::string& dir, const std::string& name);

}  // namespace troupe
