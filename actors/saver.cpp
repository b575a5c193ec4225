#include "actors/saver.hpp"

#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <exception>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "actors/param_shard.hpp"
#include "actors/runtime.hpp"
#include "actors/timeouts.hpp"
#include "core/checkpoint.hpp"
#include "ops/state/variable.hpp"

namespace troupe {
namespace {

// A variable of the session's graph, as a checkpoint names it.
struct GraphVariable {
  std::string name;  // in the shard
  DType dtype = DType::invalid;
  PartialShape shape;
  std::optional<VariablePartition> partition;
  // The name in the checkpoint: the whole variable's, for a part of a partitioned one.
  const std::string& saved_name() const { return partition ? partition->full_name : name; }
};

// An optimizer that updates a variable: its state is saved with the variable.
struct GraphOptimizer {
  std::string variable;
  OptimizerSpec spec;
};

struct GraphState {
  std::vector<GraphVariable> variables;  // once per shared name, in graph order
  std::map<std::string, std::size_t> by_name;
  std::vector<GraphOptimizer> optimizers;  // those with slots
};

GraphState graph_state(const Graph& g) {
  GraphState out;
  for (const Output& v : ops::global_variables(g)) {
    const Node& n = *v.node();
    out.by_name.emplace(variable_name(n), out.variables.size());
    out.variables.push_back({variable_name(n), get_attr<DType>(n.attrs, "dtype", n.name),
                             get_attr<PartialShape>(n.attrs, "shape", n.name), partition_of(n)});
  }
  std::set<std::pair<std::string, std::string>> seen;
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (n.op == "ApplyGradient" || n.op == "AccumulateGradient") {
      OptimizerSpec spec = optimizer_spec_of(n);
      const std::string& name = variable_name(n);
      if (spec.num_slots() > 0 && seen.emplace(name, spec.name()).second) out.optimizers.push_back({name, spec});
    }
  }
  return out;
}

std::string slot_entry(const std::string& variable, const OptimizerSpec& spec, int k) {
  return fmt::format("{}/{}/{}", variable, spec.name(), spec.slot_name(k));
}
std::string step_entry(const std::string& variable, const OptimizerSpec& spec) {
  return fmt::format("{}/{}/step", variable, spec.name());
}

int64_t step_value(const Tensor& t, const std::string& name) {
  if (t.dtype() == DType::int64 && t.num_elements() == 1) return t.data<int64_t>()[0];
  if (t.dtype() == DType::int32 && t.num_elements() == 1) return t.data<int32_t>()[0];
  fail(ErrorCode::invalid_argument, "Saver: the global step variable '{}' holds {}; it must be an integer scalar", name,
       t.describe());
}

}  // namespace

struct Saver::Impl {
  Session& session;
  SaverOptions options;
  // One save at a time: held from the snapshot until `writer` is started, so it is held while
  // the shards are asked for their contents (bounded, actors/timeouts.hpp); no other lock of
  // Troupe's is taken under it.
  std::mutex mutex;
  std::thread writer;  // the save in flight, if any

  // What every shard holds now, with the state of the optimizers the graph has.
  std::vector<ShardContents> snapshot(const GraphState& graph) const;
  // `background`: the caller goes on training meanwhile, so the writing yields the CPU to it.
  std::future<std::string> save_async(const std::string& dir, std::optional<int64_t> step,
                                      const std::string& step_variable, bool background);
  void join_writer() {
    if (writer.joinable()) writer.join();
  }
};

std::vector<ShardContents> Saver::Impl::snapshot(const GraphState& graph) const {
  const ParamShards& shards = *session.param_shards();
  std::vector<std::vector<OptimizerState>> wanted(std::size_t(shards.size()));
  for (auto& o : graph.optimizers) wanted[std::size_t(shards.index_of(o.variable))].push_back({o.variable, o.spec, {}, 0});
  std::vector<ShardContents> out(std::size_t(shards.size()));
  caf::scoped_actor self{session.runtime()->system()};
  // Asked all at once: every shard takes its snapshot between two of its own messages.
  using Handle = decltype(self->request(caf::actor{}, timeouts::shard_request(), snapshot_atom::value, wanted[0]));
  std::vector<Handle> asked;
  for (int i = 0; i < shards.size(); ++i)
    asked.push_back(self->request(shards.at(i), timeouts::shard_request(), snapshot_atom::value, wanted[std::size_t(i)]));
  for (std::size_t i = 0; i < asked.size(); ++i)
    asked[i].receive([&](ShardContents& c) { out[i] = std::move(c); },
                     [&](caf::error& e) {
                       fail(ErrorCode::unavailable, "Saver: parameter shard {} did not answer the snapshot: {}", i,
                            session.runtime()->system().render(e));
                     });
  return out;
}

namespace {

// A background save (save_async) is worth less than the training steps it runs beside: its
// threads take the lowest CPU priority (nice 19, this thread only) so that, on cores the steps
// keep busy, the copying and checksumming wait for the gaps between kernels instead of
// stretching the steps. A save() the caller waits for keeps the normal priority.
void yield_cpu_to_training() { ::setpriority(PRIO_PROCESS, pid_t(::syscall(SYS_gettid)), 19); }

}  // namespace

std::future<std::string> Saver::Impl::save_async(const std::string& dir, std::optional<int64_t> step,
                                                 const std::string& step_variable, bool background) {
  std::lock_guard<std::mutex> lock(mutex);
  join_writer();
  const GraphState graph = graph_state(session.graph());
  std::vector<ShardContents> contents = snapshot(graph);

  std::set<std::string> held;
  for (auto& c : contents)
    for (auto& [name, value] : c.variables) held.insert(name);
  std::vector<std::string> uninitialised;
  for (auto& v : graph.variables)
    if (!held.count(v.name)) uninitialised.push_back("'" + v.name + "'");
  if (!uninitialised.empty())
    fail(ErrorCode::failed_precondition,
         "Saver: cannot save into '{}': variable(s) {} not initialised (run the initializers or restore a "
         "checkpoint first); nothing was saved",
         dir, fmt::join(uninitialised, ", "));

  // Each shard's tensors, named as the checkpoint names them.
  auto saved_as = [&](const std::string& name) -> const GraphVariable* {
    auto it = graph.by_name.find(name);
    return it == graph.by_name.end() ? nullptr : &graph.variables[it->second];
  };
  std::vector<std::vector<checkpoint::SavedTensor>> files(contents.size());
  for (std::size_t i = 0; i < contents.size(); ++i) {
    for (auto& [name, value] : contents[i].variables) {
      if (name == step_variable) step = step_value(value, name);
      const GraphVariable* v = saved_as(name);
      if (v && v->partition)
        files[i].push_back({v->partition->full_name, value, v->partition->full_shape, v->partition->row_begin});
      else
        files[i].push_back({name, value, value.shape(), 0});
    }
    for (auto& o : contents[i].optimizers) {
      const GraphVariable* v = saved_as(o.variable);
      const std::string& base = v ? v->saved_name() : o.variable;
      const bool split = v && v->partition;
      for (int k = 0; k < int(o.slots.size()); ++k) {
        const Tensor& slot = o.slots[std::size_t(k)];
        files[i].push_back({slot_entry(base, o.spec, k), slot, split ? v->partition->full_shape : slot.shape(),
                            split ? v->partition->row_begin : 0});
      }
      // A partitioned variable's parts are updated together: their count is saved once.
      if (!split || v->partition->row_begin == 0)
        files[i].push_back({step_entry(base, o.spec), Tensor::scalar<int64_t>(o.step), Shape{}, 0});
    }
  }
  if (!step)
    fail(ErrorCode::invalid_argument, "Saver: the global step variable '{}' is not a variable of the session",
         step_variable);

  // Written off the scheduler's threads: one thread per shard's file, then one publish.
  std::promise<std::string> done;
  std::future<std::string> result = done.get_future();
  writer = std::thread([dir, background, step = *step, files = std::move(files), max_to_keep = options.max_to_keep,
                        done = std::move(done)]() mutable {
    if (background) yield_cpu_to_training();
    std::string temp;
    try {
      temp = checkpoint::begin_save(dir, step);
      std::vector<std::vector<checkpoint::IndexEntry>> entries(files.size());
      std::vector<std::exception_ptr> errors(files.size());
      std::vector<std::thread> shard_writers;
      for (std::size_t i = 0; i < files.size(); ++i) {
        if (files[i].empty()) continue;
        shard_writers.emplace_back([&, i] {
          try {
            if (background) yield_cpu_to_training();
            entries[i] = checkpoint::write_data_file(
                temp, fmt::format("shard-{:05d}-of-{:05d}.data", i, files.size()), std::move(files[i]));
          } catch (...) {
            errors[i] = std::current_exception();
          }
        });
      }
      for (auto& t : shard_writers) t.join();
      files.clear();  // lets the shards update in place again
      for (auto& e : errors)
        if (e) std::rethrow_exception(e);
      std::vector<checkpoint::IndexEntry> all;
      for (auto& e : entries) all.insert(all.end(), e.begin(), e.end());
      done.set_value(checkpoint::publish(dir, temp, step, std::move(all), max_to_keep));
    } catch (const Error& e) {
      files.clear();
      if (!temp.empty()) checkpoint::abandon(temp);
      done.set_exception(std::make_exception_ptr(Error(
          e.code(), fmt::format("Saver: the save of step {} into '{}' failed; the checkpoints published there are "
                                "unchanged: {}",
                                step, dir, e.what()))));
    } catch (...) {
      files.clear();
      if (!temp.empty()) checkpoint::abandon(temp);
      done.set_exception(std::current_exception());
    }
  });
  return result;
}

Saver::Saver(Session& session, SaverOptions options) : impl_(new Impl{session, options, {}, {}}) {
  // A cluster session's variables live in its tasks' processes, not in this one's shards.
  if (!session.options().target.empty())
    fail(ErrorCode::unimplemented,
         "Saver: checkpoints of a cluster session's variables (target '{}') are not built yet; they live in the "
         "tasks' troupe-node processes",
         session.options().target);
}

Saver::~Saver() {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  impl_->join_writer();
}

std::future<std::string> Saver::save_async(const std::string& dir, int64_t global_step) {
  return impl_->save_async(dir, global_step, {}, true);
}

namespace {

const std::string& step_variable_name(const Output& global_step) {
  TROUPE_CHECK_ARG(global_step && global_step.node()->op == "VariableV2",
                   "Saver::save: the global step must be the output of a Variable, got {}",
                   global_step ? global_step.node()->describe() : "an empty Output");
  return variable_name(*global_step.node());
}

}  // namespace

std::future<std::string> Saver::save_async(const std::string& dir, const Output& global_step) {
  return impl_->save_async(dir, std::nullopt, step_variable_name(global_step), true);
}

// A save the caller waits for writes at full speed.
std::string Saver::save(const std::string& dir, int64_t global_step) {
  return impl_->save_async(dir, global_step, {}, false).get();
}

std::string Saver::save(const std::string& dir, const Output& global_step) {
  return impl_->save_async(dir, std::nullopt, step_variable_name(global_step), false).get();
}

RestoreReport Saver::restore(const std::string& path) {
  const GraphState graph = graph_state(impl_->session.graph());
  const checkpoint::Index index = checkpoint::read_index(path);
  std::map<std::string, const checkpoint::IndexEntry*> saved;
  for (auto& e : index.entries) saved.emplace(e.name, &e);
  const std::string where = fmt::format("{}/{}", path, checkpoint::kIndexFileName);

  // One request per tensor to assign, and where it goes.
  std::vector<checkpoint::Request> requests;
  std::vector<std::string> missing;
  std::set<std::string> wanted;
  auto ask = [&](const std::string& name, DType dtype, Shape full_shape, int64_t row_begin, int64_t rows) {
    wanted.insert(name);
    if (!saved.count(name)) missing.push_back("'" + name + "'");
    requests.push_back({name, dtype, std::move(full_shape), row_begin, rows});
  };
  // The whole shape a variable is read with: its own, or, where the graph leaves dimensions
  // open, the saved one if it fits.
  auto full_shape_of = [&](const GraphVariable& v) -> Shape {
    if (v.partition) return v.partition->full_shape;
    if (v.shape.fully_defined()) return v.shape.to_shape();
    auto it = saved.find(v.name);
    if (it == saved.end()) return Shape{};
    if (!v.shape.compatible_with(it->second->full_shape))
      fail(ErrorCode::invalid_argument,
           "Saver: cannot restore '{}', no variable was changed: {}: variable '{}' has shape {}, the graph's has shape {}",
           path, where, v.name, it->second->full_shape.to_string(), v.shape.to_string());
    return it->second->full_shape;
  };
  auto rows_of = [](const GraphVariable& v) -> int64_t { return v.partition ? v.shape.dim(0) : -1; };
  auto begin_of = [](const GraphVariable& v) -> int64_t { return v.partition ? v.partition->row_begin : 0; };

  for (auto& v : graph.variables) ask(v.saved_name(), v.dtype, full_shape_of(v), begin_of(v), rows_of(v));
  const std::size_t num_variables = requests.size();
  for (auto& o : graph.optimizers) {
    const GraphVariable& v = graph.variables[graph.by_name.at(o.variable)];
    for (int k = 0; k < o.spec.num_slots(); ++k)
      ask(slot_entry(v.saved_name(), o.spec, k), v.dtype, full_shape_of(v), begin_of(v), rows_of(v));
    ask(step_entry(v.saved_name(), o.spec), DType::int64, Shape{}, 0, -1);
  }
  if (!missing.empty())
    fail(ErrorCode::not_found, "Saver: cannot restore '{}', no variable was changed: {} has no {} {} (the session's graph has {})",
         path, where, missing.size() == 1 ? "variable" : "variables", fmt::join(missing, ", "),
         missing.size() == 1 ? "it" : "them");

  // Everything is read and checked before anything is assigned.
  std::vector<Tensor> values;
  try {
    values = checkpoint::read(path, requests);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("Saver: cannot restore '{}', no variable was changed: {}", path, e.what()));
  }

  const ParamShards& shards = *impl_->session.param_shards();
  std::vector<ShardContents> contents(std::size_t(shards.size()));
  for (std::size_t i = 0; i < num_variables; ++i) {
    const GraphVariable& v = graph.variables[i];
    contents[std::size_t(shards.index_of(v.name))].variables.emplace_back(v.name, std::move(values[i]));
  }
  std::size_t next = num_variables;
  for (auto& o : graph.optimizers) {
    OptimizerState state{o.variable, o.spec, {}, 0};
    for (int k = 0; k < o.spec.num_slots(); ++k) state.slots.push_back(std::move(values[next++]));
    state.step = values[next++].scalar_value<int64_t>();
    contents[std::size_t(shards.index_of(o.variable))].optimizers.push_back(std::move(state));
  }
  caf::scoped_actor self{impl_->session.runtime()->system()};
  for (int i = 0; i < shards.size(); ++i)
    self->request(shards.at(i), timeouts::shard_request(), restore_atom::value, std::move(contents[std::size_t(i)]))
        .receive([](ShardReply&) {},
                 [&](caf::error& e) {
                   fail(ErrorCode::unavailable, "Saver: parameter shard {} did not answer the restore: {}", i,
                        impl_->session.runtime()->system().render(e));
                 });

  RestoreReport report{path, index.global_step, {wanted.begin(), wanted.end()}, {}};
  for (auto& [name, entry] : saved)
    if (!wanted.count(name)) report.extra.push_back(name);
  return report;
}

std::optional<std::string> latest_checkpoint(const std::string& dir) { return checkpoint::latest_checkpoint(dir); }

}  // namespace troupe
