#pragma once
// Checkpoints of a cluster session (actors/state/saver.hpp, docs/cluster.md "Checkpoints on a
// cluster"), TensorFlow's sharded saver: every task saves and restores the variables it holds
// itself, in parallel with the others, and the chief (the process calling Saver::save) writes the
// index and publishes. The messages, master (chief) -> worker:
//   (save_shards_atom, SaveShards)       -> SaveShardsReply: the task snapshots its parameter
//                                           shards (the variables listed, the optimizers' state),
//                                           writes one data file per shard holding any into
//                                           SaveShards::temp_dir (a directory every task sees:
//                                           shared on several hosts) and answers the entries
//   (restore_shards_atom, RestoreShards) -> (code, message): the task reads and verifies its
//                                           slices (checksums, dtypes, shapes); with `assign`
//                                           it then assigns them, one message per shard
//   (check_dir_atom, dir, probe, chief)  -> (code, message): whether the task can write
//                                           checkpoints into `dir` (checkpoint::check_writable)
//                                           and sees the file `probe` the chief made there
//                                           (the same directory, not one of the same name)
// The worker answers each from a helper actor of its own thread, so steps keep running.
// Also what the local Saver and the tasks share: the tensors of a shard's snapshot as the
// checkpoint names them. Internal to actors/: includes CAF.
#include <caf/all.hpp>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "actors/messages.hpp"
#include "core/checkpoint.hpp"

namespace troupe {

struct MemberContext;

// How one variable of the graph is saved: under its own name, or as rows [row_begin, ...) of
// the partitioned variable `saved_name` of shape full_shape.
struct VariableLayout {
  std::string saved_name;
  bool partitioned = false;
  Shape full_shape;
  int64_t row_begin = 0;
};
using VariableLayouts = std::map<std::string, VariableLayout>;  // by the name in the shard

// The tensors of one shard's snapshot as the checkpoint names them: its variables, each
// optimizer's slots "<variable>/<optimizer>/<slot>" and step count "<variable>/<optimizer>/step"
// (once for a partitioned variable). `only_listed`: variables missing from `layouts` are left
// out (a task's shards may hold other sessions' variables). Sets `step` when the shard holds
// `step_variable` (an integer scalar, else invalid_argument).
std::vector<checkpoint::SavedTensor> tensors_to_save(const ShardContents& contents, const VariableLayouts& layouts,
                                                     bool only_listed, const std::string& step_variable,
                                                     std::optional<int64_t>& step);
std::string slot_entry(const std::string& variable, const OptimizerSpec& spec, int k);
std::string step_entry(const std::string& variable, const OptimizerSpec& spec);

// ---- On the wire

struct WireOptimizer {
  std::string variable;
  int32_t kind = 0;
  double momentum = 0, initial_accumulator = 0, rho = 0, beta1 = 0, beta2 = 0, epsilon = 0;
  bool nesterov = false;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WireOptimizer& x) {
  return f(caf::meta::type_name("troupe.WireOptimizer"), x.variable, x.kind, x.momentum, x.initial_accumulator, x.rho,
           x.beta1, x.beta2, x.epsilon, x.nesterov);
}
WireOptimizer to_wire(const std::string& variable, const OptimizerSpec& spec);
OptimizerSpec spec_of(const WireOptimizer& w);

struct WireLayout {
  std::string name, saved_name;
  bool partitioned = false;
  std::vector<int64_t> full_dims;
  int64_t row_begin = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WireLayout& x) {
  return f(caf::meta::type_name("troupe.WireLayout"), x.name, x.saved_name, x.partitioned, x.full_dims, x.row_begin);
}

struct SaveShards {
  std::string temp_dir;
  std::vector<WireLayout> variables;  // the graph's: a task saves those it holds
  std::vector<WireOptimizer> optimizers;
  std::string step_variable;  // the global step's variable, "" when the step is given
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SaveShards& x) {
  return f(caf::meta::type_name("troupe.SaveShards"), x.temp_dir, x.variables, x.optimizers, x.step_variable);
}

struct WireIndexEntry {
  std::string name, file;
  int32_t dtype = 0;
  std::vector<int64_t> full_dims;
  int64_t row_begin = 0, rows = 0;
  uint64_t offset = 0, length = 0;
  uint32_t crc32c = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WireIndexEntry& x) {
  return f(caf::meta::type_name("troupe.WireIndexEntry"), x.name, x.file, x.dtype, x.full_dims, x.row_begin, x.rows,
           x.offset, x.length, x.crc32c);
}

struct SaveShardsReply {
  int32_t code = 0;  // ErrorCode
  std::string message;
  std::vector<WireIndexEntry> entries;
  std::vector<std::string> held;   // the graph's variables the task holds
  std::vector<std::string> files;  // the data files it wrote
  bool has_step = false;
  int64_t step = 0;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SaveShardsReply& x) {
  return f(caf::meta::type_name("troupe.SaveShardsReply"), x.code, x.message, x.entries, x.held, x.files, x.has_step,
           x.step);
}

struct WireRequest {
  std::string name;
  int32_t dtype = 0;
  std::vector<int64_t> full_dims;
  int64_t row_begin = 0, rows = -1;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WireRequest& x) {
  return f(caf::meta::type_name("troupe.WireRequest"), x.name, x.dtype, x.full_dims, x.row_begin, x.rows);
}

// What one task restores: `requests` holds one request per variable (in order), then per
// optimizer its slots and its step count.
struct RestoreShards {
  std::string path;
  bool assign = false;  // false: read and verify only
  std::vector<std::string> variables;
  std::vector<WireOptimizer> optimizers;
  std::vector<WireRequest> requests;
};
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RestoreShards& x) {
  return f(caf::meta::type_name("troupe.RestoreShards"), x.path, x.assign, x.variables, x.optimizers, x.requests);
}

using save_shards_atom = caf::atom_constant<caf::atom("saveshard")>;
using restore_shards_atom = caf::atom_constant<caf::atom("restshard")>;
using check_dir_atom = caf::atom_constant<caf::atom("checkdir")>;

void add_checkpoint_types(caf::actor_system_config& config);

// ---- The task's side (the worker's handlers; blocking: run on a thread of their own)
SaveShardsReply save_task_shards(MemberContext& context, const SaveShards& request);
std::pair<int32_t, std::string> restore_task_shards(MemberContext& context, const RestoreShards& request);
std::pair<int32_t, std::string> check_task_dir(MemberContext& context, const std::string& dir,
                                               const std::string& probe, const std::string& chief);

}  // namespace troupe
