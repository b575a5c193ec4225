#include "actors/state/saver.hpp"
#include "actors/session_impl.hpp"

#include <fcntl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <exception>
#include <filesystem>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>

#include "actors/cluster/cluster_checkpoint.hpp"
#include "actors/cluster/master.hpp"
#include "actors/state/param_shard.hpp"
#include "actors/runtime.hpp"
#include "actors/signature.hpp"
#include "actors/timeouts.hpp"
#include "core/checkpoint.hpp"
#include "core/device_name.hpp"
#include "ops/state/variable.hpp"

namespace troupe {
namespace {

// A variable of the session's graph, as a checkpoint names it.
struct GraphVariable {
  std::string name;  // in the shard
  DType dtype = DType::invalid;
  PartialShape shape;
  std::optional<VariablePartition> partition;
  std::string device;  // as the graph requests it
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
                             get_attr<PartialShape>(n.attrs, "shape", n.name), partition_of(n), n.requested_device});
  }
  std::set<std::pair<std::string, std::string>> seen;
  for (int id = 0; id < g.size(); ++id) {
    const Node& n = g.node(id);
    if (n.op == "ApplyGradient" || n.op == "SparseApplyGradient" || n.op == "AccumulateGradient") {
      OptimizerSpec spec = optimizer_spec_of(n);
      const std::string& name = variable_name(n);
      if (spec.num_slots() > 0 && seen.emplace(name, spec.name()).second) out.optimizers.push_back({name, spec});
    }
  }
  return out;
}

// The task ("job:index") a variable is placed on, as the signature pipeline places it on a
// cluster whose target is `target_task`.
std::string task_of_variable(const GraphVariable& v, const std::string& target_task) {
  const auto colon = target_task.find(':');
  const VariableHome home =
      variable_home(DeviceSpec::parse(v.device), target_task.substr(0, colon), std::stoi(target_task.substr(colon + 1)));
  return fmt::format("{}:{}", home.job, home.task);
}

// The tasks holding the graph's variables: all a save or a restore needs (a worker away holds
// none in a job whose variables live on parameter servers).
std::vector<std::string> holder_tasks(const GraphState& graph, const std::string& target_task) {
  std::set<std::string> out;
  for (auto& v : graph.variables) out.insert(task_of_variable(v, target_task));
  return {out.begin(), out.end()};
}

// How each variable of the graph is saved.
VariableLayouts layouts_of(const GraphState& graph) {
  VariableLayouts out;
  for (auto& v : graph.variables)
    out.emplace(v.name, v.partition ? VariableLayout{v.partition->full_name, true, v.partition->full_shape,
                                                     v.partition->row_begin}
                                    : VariableLayout{v.name, false, Shape{}, 0});
  return out;
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
  // A cluster session's save: every task writes its own files (cluster_checkpoint.hpp).
  std::future<std::string> save_on_cluster(Master& master, const GraphState& graph, const std::string& dir,
                                           std::optional<int64_t> step, const std::string& step_variable);
  void join_writer() {
    if (writer.joinable()) writer.join();
  }
  RestoreReport restore(const std::string& path, const std::vector<std::string>& tasks);
};

std::vector<ShardContents> Saver::Impl::snapshot(const GraphState& graph) const {
  const ParamShards& shards = *param_shards_of(session);
  std::vector<std::vector<OptimizerState>> wanted(std::size_t(shards.size()));
  for (auto& o : graph.optimizers) wanted[std::size_t(shards.index_of(o.variable))].push_back({o.variable, o.spec, {}, 0});
  std::vector<ShardContents> out(std::size_t(shards.size()));
  caf::scoped_actor self{runtime_of(session)->system()};
  // Asked all at once: every shard takes its snapshot between two of its own messages.
  using Handle = decltype(self->request(ShardActor{}, timeouts::shard_checkpoint(), snapshot_atom::value, wanted[0]));
  std::vector<Handle> asked;
  for (int i = 0; i < shards.size(); ++i)
    asked.push_back(self->request(shards.at(i), timeouts::shard_checkpoint(), snapshot_atom::value, wanted[std::size_t(i)]));
  for (std::size_t i = 0; i < asked.size(); ++i)
    asked[i].receive([&](ShardContents& c) { out[i] = std::move(c); },
                     [&](caf::error& e) {
                       fail(ErrorCode::unavailable, "Saver: parameter shard {} did not answer the snapshot: {}", i,
                            runtime_of(session)->system().render(e));
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
  if (Master* master = cluster_master_of(session)) return save_on_cluster(*master, graph, dir, step, step_variable);
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
  const VariableLayouts layouts = layouts_of(graph);
  std::vector<std::vector<checkpoint::SavedTensor>> files(contents.size());
  for (std::size_t i = 0; i < contents.size(); ++i) files[i] = tensors_to_save(contents[i], layouts, false, step_variable, step);
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

Saver::Saver(Session& session, SaverOptions options) : impl_(new Impl{session, options, {}, {}}) {}

namespace {

// The errors of a request asked of every task at once: the first error's code, and every message.
struct TaskErrors {
  ErrorCode code = ErrorCode::ok;
  std::vector<std::string> messages;
  void add(ErrorCode c, std::string message) {
    if (code == ErrorCode::ok) code = c;
    messages.push_back(std::move(message));
  }
  void lost(const Master::TaskWorker& t, const char* what, std::chrono::milliseconds bound, caf::actor_system& sys,
            const caf::error& e) {
    add(ErrorCode::unavailable,
        fmt::format("task {} did not answer the {} within {} ms: {}", t.task, what, bound.count(), sys.render(e)));
  }
};

}  // namespace

std::future<std::string> Saver::Impl::save_on_cluster(Master& master, const GraphState& graph, const std::string& dir,
                                                      std::optional<int64_t> given_step,
                                                      const std::string& step_variable) {
  SaveShards request;
  for (auto& [name, layout] : layouts_of(graph))
    request.variables.push_back({name, layout.saved_name, layout.partitioned, layout.full_shape.dims(), layout.row_begin});
  for (auto& o : graph.optimizers) request.optimizers.push_back(to_wire(o.variable, o.spec));
  request.step_variable = step_variable;
  std::vector<std::string> graph_variables;
  for (auto& v : graph.variables) graph_variables.push_back(v.name);
  // Only the tasks that hold variables: a save goes on while a worker is away.
  const std::vector<std::string> holders = holder_tasks(graph, master.target_task());
  std::vector<Master::TaskWorker> tasks;
  if (!holders.empty()) tasks = master.task_workers(holders);
  std::promise<std::string> done;
  std::future<std::string> result = done.get_future();
  // The chief makes the temporary directory, every task writes its files into it at once, the
  // chief writes the index and publishes.
  writer = std::thread([&master, dir, given_step, request = std::move(request), tasks = std::move(tasks),
                        graph_variables = std::move(graph_variables), bound = options.cluster_task_timeout,
                        max_to_keep = options.max_to_keep, done = std::move(done)]() mutable {
    std::string temp;
    try {
      temp = checkpoint::begin_save(dir, given_step.value_or(0));
      request.temp_dir = temp;
      caf::actor_system& sys = master.system();
      caf::scoped_actor self{sys};
      using Handle = decltype(self->request(WorkerActor{}, caf::duration{bound}, save_shards_atom::value, request));
      std::vector<Handle> asked;
      for (auto& t : tasks) asked.push_back(self->request(t.worker, caf::duration{bound}, save_shards_atom::value, request));
      TaskErrors errors;
      std::vector<checkpoint::IndexEntry> entries;
      std::map<std::string, std::string> holder;  // variable -> task
      std::optional<int64_t> step = given_step;
      for (std::size_t i = 0; i < asked.size(); ++i)
        asked[i].receive(
            [&](SaveShardsReply& r) {
              if (r.code != int32_t(ErrorCode::ok)) return errors.add(ErrorCode(r.code), r.message);
              for (auto& e : r.entries)
                entries.push_back({e.name, DType(e.dtype), Shape(e.full_dims), e.row_begin, e.rows, e.file, e.offset,
                                   e.length, e.crc32c});
              for (auto& name : r.held) {
                auto [it, fresh] = holder.emplace(name, tasks[i].task);
                if (!fresh)
                  errors.add(ErrorCode::failed_precondition,
                             fmt::format("variable '{}' is held by both task {} and task {}", name, it->second,
                                         tasks[i].task));
              }
              if (r.has_step) step = r.step;
            },
            [&](caf::error& e) { errors.lost(tasks[i], "save", bound, sys, e); });
      if (errors.code != ErrorCode::ok) fail(errors.code, "{}", fmt::join(errors.messages, "; "));
      std::vector<std::string> uninitialised;
      for (auto& v : graph_variables)
        if (!holder.count(v)) uninitialised.push_back("'" + v + "'");
      if (!uninitialised.empty())
        fail(ErrorCode::failed_precondition,
             "variable(s) {} not initialised on any task (run the initializers or restore a checkpoint first)",
             fmt::join(uninitialised, ", "));
      if (!step)
        fail(ErrorCode::invalid_argument, "the global step variable '{}' is not held by any task",
             request.step_variable);
      done.set_value(checkpoint::publish(dir, temp, *step, std::move(entries), max_to_keep));
    } catch (const Error& e) {
      if (!temp.empty()) checkpoint::abandon(temp);
      done.set_exception(std::make_exception_ptr(Error(
          e.code(), fmt::format("Saver: the save into '{}' of a cluster session failed; the checkpoints published "
                                "there are unchanged: {}",
                                dir, e.what()))));
    } catch (...) {
      if (!temp.empty()) checkpoint::abandon(temp);
      done.set_exception(std::current_exception());
    }
  });
  return result;
}

namespace {

// A file of a name of its own in the directory, written and fsynced, removed when it goes.
struct SharedProbe {
  explicit SharedProbe(const std::string& dir) {
    std::random_device random;
    name = fmt::format(".shared-probe-{}-{:08x}{:08x}", ::getpid(), random(), random());
    path = (std::filesystem::path(dir) / name).string();
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0 || ::fsync(fd) != 0 || ::close(fd) != 0)
      fail(ErrorCode::unavailable, "Saver: cannot make the probe file {}: {}", path, std::strerror(errno));
  }
  ~SharedProbe() { ::unlink(path.c_str()); }
  std::string name, path;
};

}  // namespace

void Saver::check_directory(const std::string& dir) {
  Master* master = cluster_master_of(impl_->session);
  try {
    checkpoint::check_writable(dir);  // this process writes the index and the pointer
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("Saver: {}{}", master ? "this process (" + master->target_task() + "): " : "",
                                      e.what()));
  }
  if (!master) return;
  const std::vector<std::string> holders = holder_tasks(graph_state(impl_->session.graph()), master->target_task());
  if (holders.empty()) return;
  std::vector<Master::TaskWorker> tasks = master->task_workers(holders);
  // A file of a name no other directory has, which every task must see: a directory of the same
  // path on another host (no shared file system) would take the task's shards where the chief's
  // index never finds them.
  const SharedProbe probe(dir);
  caf::actor_system& sys = master->system();
  caf::scoped_actor self{sys};
  const auto bound = impl_->options.cluster_task_timeout;
  const std::string chief = master->target_task();
  using Handle =
      decltype(self->request(WorkerActor{}, caf::duration{bound}, check_dir_atom::value, dir, probe.name, chief));
  std::vector<Handle> asked;
  for (auto& t : tasks)
    asked.push_back(self->request(t.worker, caf::duration{bound}, check_dir_atom::value, dir, probe.name, chief));
  TaskErrors errors;
  for (std::size_t i = 0; i < asked.size(); ++i)
    asked[i].receive(
        [&](int32_t code, std::string& message) {
          if (code != int32_t(ErrorCode::ok)) errors.add(ErrorCode(code), std::move(message));
        },
        [&](caf::error& e) { errors.lost(tasks[i], "check of the checkpoint directory", bound, sys, e); });
  if (errors.code != ErrorCode::ok) fail(errors.code, "Saver: {}", fmt::join(errors.messages, "; "));
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

namespace {

// A cluster session's restore: every task reads and verifies its variables' slices; only when
// all of them have, every task assigns them (one message per shard).
// With `only` (tasks), only the variables placed on those; returns the variables assigned.
std::vector<std::string> restore_on_cluster(Master& master, const GraphState& graph, const std::string& path,
                                            const std::vector<checkpoint::Request>& requests,
                                            std::chrono::milliseconds bound, const std::vector<std::string>& only) {
  const std::string target = master.target_task();
  std::map<std::string, RestoreShards> share;  // by task
  auto wire = [](const checkpoint::Request& r) {
    return WireRequest{r.name, int32_t(r.dtype), r.full_shape.dims(), r.row_begin, r.rows};
  };
  std::size_t next = 0;
  for (auto& v : graph.variables) {
    RestoreShards& s = share[task_of_variable(v, target)];
    s.variables.push_back(v.name);
    s.requests.push_back(wire(requests[next++]));
  }
  std::map<std::string, std::vector<WireRequest>> slots;
  for (auto& o : graph.optimizers) {
    const std::string task = task_of_variable(graph.variables[graph.by_name.at(o.variable)], target);
    share[task].optimizers.push_back(to_wire(o.variable, o.spec));
    for (int k = 0; k <= o.spec.num_slots(); ++k) slots[task].push_back(wire(requests[next++]));
  }
  for (auto& [task, rs] : slots) share[task].requests.insert(share[task].requests.end(), rs.begin(), rs.end());
  for (auto& [task, s] : share) s.path = path;

  for (auto& task : only) {
    try {
      (void)master.task_index(task);
    } catch (const Error& e) {
      fail(ErrorCode::invalid_argument, "Saver: cannot restore '{}' on task {}: {}", path, task, e.what());
    }
  }
  if (!only.empty())
    for (auto it = share.begin(); it != share.end();)
      it = std::find(only.begin(), only.end(), it->first) == only.end() ? share.erase(it) : std::next(it);
  for (auto& [task, s] : share) {
    try {
      (void)master.task_index(task);
    } catch (const Error& e) {
      fail(ErrorCode::invalid_argument, "Saver: cannot restore '{}', no variable was changed: variable '{}' is placed on "
           "task {}: {}", path, s.variables.empty() ? s.optimizers[0].variable : s.variables[0], task, e.what());
    }
  }
  // Only the tasks that hold the variables restored are asked (and, when lost, reconnected).
  std::vector<std::string> holders;
  for (auto& [task, s] : share) holders.push_back(task);
  std::map<std::string, WorkerActor> worker;
  if (!holders.empty())
    for (auto& t : master.task_workers(holders)) worker.emplace(t.task, t.worker);
  std::vector<std::string> assigned;
  for (auto& [task, s] : share) assigned.insert(assigned.end(), s.variables.begin(), s.variables.end());
  if (share.empty()) return assigned;
  caf::actor_system& sys = master.system();
  for (bool assign : {false, true}) {
    caf::scoped_actor self{sys};
    TaskErrors errors;
    using Handle = decltype(self->request(WorkerActor{}, caf::duration{bound}, restore_shards_atom::value, share.begin()->second));
    std::vector<std::pair<std::string, Handle>> asked;
    for (auto& [task, s] : share) {
      s.assign = assign;
      asked.emplace_back(task, self->request(worker[task], caf::duration{bound}, restore_shards_atom::value, s));
    }
    for (auto& [task, handle] : asked)
      handle.receive(
          [&](int32_t code, std::string& message) {
            if (code != int32_t(ErrorCode::ok)) errors.add(ErrorCode(code), message);
          },
          [&, task = task](caf::error& e) { errors.lost({task, {}}, "restore", bound, sys, e); });
    if (errors.code != ErrorCode::ok)
      fail(errors.code, "Saver: cannot restore '{}', {}: {}", path,
           assign ? "some tasks may have assigned their variables and others not" : "no variable was changed",
           fmt::join(errors.messages, "; "));
  }
  return assigned;
}

}  // namespace

RestoreReport Saver::restore(const std::string& path) { return restore_tasks(path, {}); }

namespace {

// The directory of checkpoint `path` ("." for a bare name) and its step, if it is a ckpt-<step>.
std::pair<std::string, std::optional<int64_t>> place_of(const std::string& path) {
  const std::filesystem::path p(path);
  return {p.has_parent_path() ? p.parent_path().string() : ".", checkpoint::checkpoint_step(p.filename().string())};
}

std::string with_intact(const Error& cause, const std::optional<std::string>& intact) {
  return fmt::format("{}; the newest intact checkpoint before it is {}", cause.what(),
                     intact ? *intact : "none (no older checkpoint there verifies)");
}

}  // namespace

DamagedCheckpoint::DamagedCheckpoint(const Error& cause, std::optional<std::string> intact)
    : Error(cause.code(), with_intact(cause, intact)), intact_(std::move(intact)) {}

RestoreReport Saver::restore_tasks(const std::string& path, const std::vector<std::string>& tasks) {
  try {
    return impl_->restore(path, tasks);
  } catch (const Error& e) {
    if (e.code() != ErrorCode::data_loss) throw;
    const auto [dir, step] = place_of(path);
    if (!step) throw;
    throw DamagedCheckpoint(e, checkpoint::newest_intact_checkpoint(dir, step));
  }
}

namespace {

// What a restore reads: one request per tensor to assign (the variables' first, then each
// optimizer's slots and step), and every name the graph wants.
struct RestorePlan {
  std::vector<checkpoint::Request> requests;
  std::size_t num_variables = 0;  // the first requests
  std::set<std::string> wanted;
};

// The parts of a refused restore's message: the differences first (the one shape that differs is
// what a user looks for), then how many names are missing, a few of them shown (a model of
// another size lists them all), then how many the checkpoint has besides.
std::string mismatch(const std::vector<std::string>& differ, const std::vector<std::string>& missing, std::size_t extra) {
  auto some = [](const std::vector<std::string>& names, std::size_t shown, const char* sep) {
    if (names.size() <= shown) return fmt::format("{}", fmt::join(names, sep));
    return fmt::format("{} and {} more", fmt::join(names.begin(), names.begin() + std::ptrdiff_t(shown), sep),
                       names.size() - shown);
  };
  std::vector<std::string> parts;
  if (!differ.empty())
    parts.push_back(fmt::format("{} of the graph's variables differ from the checkpoint's: {}", differ.size(),
                                some(differ, 4, "; ")));
  if (!missing.empty())
    parts.push_back(fmt::format("{} {} of the session's graph {} not in the checkpoint: {}", missing.size(),
                                missing.size() == 1 ? "variable" : "variables", missing.size() == 1 ? "is" : "are",
                                some(missing, 6, ", ")));
  if (extra > 0) parts.push_back(fmt::format("the checkpoint has {} name(s) the graph lacks", extra));
  return fmt::format("{}", fmt::join(parts, "; "));
}

// The requests restoring `graph` from the checkpoint `saved` describes; refused, changing nothing,
// when a name is missing there or saved with another dtype or shape.
RestorePlan plan_restore(const GraphState& graph, const std::map<std::string, const checkpoint::IndexEntry*>& saved,
                         const std::string& path, const std::string& where) {
  RestorePlan plan;
  std::vector<std::string> missing;
  std::vector<std::string> differ;  // saved with another dtype or shape than the graph's
  auto differs = [&](const std::string& name, DType dtype, const auto& shape, const checkpoint::IndexEntry& entry) {
    differ.push_back(fmt::format("'{}' is {}{} in the graph, {}{} in the checkpoint", name, name_of(dtype),
                                 shape.to_string(), name_of(entry.dtype), entry.full_shape.to_string()));
  };
  auto ask = [&](const std::string& name, DType dtype, Shape full_shape, int64_t row_begin, int64_t rows) {
    plan.wanted.insert(name);
    auto it = saved.find(name);
    if (it == saved.end()) missing.push_back("'" + name + "'");
    else if (it->second->dtype != dtype || !(it->second->full_shape == full_shape))
      differs(name, dtype, full_shape, *it->second);
    plan.requests.push_back({name, dtype, std::move(full_shape), row_begin, rows});
  };
  // The whole shape a variable is read with: its own, or, where the graph leaves dimensions
  // open, the saved one if it fits.
  auto full_shape_of = [&](const GraphVariable& v) -> Shape {
    if (v.partition) return v.partition->full_shape;
    if (v.shape.fully_defined()) return v.shape.to_shape();
    auto it = saved.find(v.name);
    if (it == saved.end()) return Shape{};
    if (!v.shape.compatible_with(it->second->full_shape)) {
      differs(v.name, v.dtype, v.shape, *it->second);
      return Shape{};
    }
    return it->second->full_shape;
  };
  auto rows_of = [](const GraphVariable& v) -> int64_t { return v.partition ? v.shape.dim(0) : -1; };
  auto begin_of = [](const GraphVariable& v) -> int64_t { return v.partition ? v.partition->row_begin : 0; };

  for (auto& v : graph.variables) ask(v.saved_name(), v.dtype, full_shape_of(v), begin_of(v), rows_of(v));
  plan.num_variables = plan.requests.size();
  for (auto& o : graph.optimizers) {
    const GraphVariable& v = graph.variables[graph.by_name.at(o.variable)];
    for (int k = 0; k < o.spec.num_slots(); ++k)
      ask(slot_entry(v.saved_name(), o.spec, k), v.dtype, full_shape_of(v), begin_of(v), rows_of(v));
    ask(step_entry(v.saved_name(), o.spec), DType::int64, Shape{}, 0, -1);
  }
  if (!missing.empty() || !differ.empty()) {
    std::size_t extra = 0;
    for (auto& [name, entry] : saved) extra += plan.wanted.count(name) ? 0 : 1;
    fail(differ.empty() ? ErrorCode::not_found : ErrorCode::invalid_argument,
         "Saver: cannot restore '{}', no variable was changed: the session's graph does not match {}: {}", path, where,
         mismatch(differ, missing, extra));
  }
  return plan;
}

// A local session's restore: everything read and checked before anything is assigned, then each
// parameter shard given its variables and optimizer state.
void restore_locally(const Session& session, const GraphState& graph, const std::string& path, const RestorePlan& plan) {
  std::vector<Tensor> values;
  try {
    values = checkpoint::read(path, plan.requests);
  } catch (const Error& e) {
    throw Error(e.code(), fmt::format("Saver: cannot restore '{}', no variable was changed: {}", path, e.what()));
  }
  const ParamShards& shards = *param_shards_of(session);
  std::vector<ShardContents> contents(std::size_t(shards.size()));
  for (std::size_t i = 0; i < plan.num_variables; ++i) {
    const GraphVariable& v = graph.variables[i];
    contents[std::size_t(shards.index_of(v.name))].variables.emplace_back(v.name, std::move(values[i]));
  }
  std::size_t next = plan.num_variables;
  for (auto& o : graph.optimizers) {
    OptimizerState state{o.variable, o.spec, {}, 0};
    for (int k = 0; k < o.spec.num_slots(); ++k) state.slots.push_back(std::move(values[next++]));
    state.step = values[next++].scalar_value<int64_t>();
    contents[std::size_t(shards.index_of(o.variable))].optimizers.push_back(std::move(state));
  }
  caf::actor_system& system = runtime_of(session)->system();
  caf::scoped_actor self{system};
  for (int i = 0; i < shards.size(); ++i)
    self->request(shards.at(i), timeouts::shard_checkpoint(), restore_atom::value, std::move(contents[std::size_t(i)]))
        .receive([](ShardReply&) {},
                 [&](caf::error& e) {
                   fail(ErrorCode::unavailable, "Saver: parameter shard {} did not answer the restore: {}", i,
                        system.render(e));
                 });
}

}  // namespace

RestoreReport Saver::Impl::restore(const std::string& path, const std::vector<std::string>& tasks) {
  if (!tasks.empty() && !cluster_master_of(session))
    fail(ErrorCode::invalid_argument, "Saver: restoring the variables of task(s) {} needs a cluster session",
         fmt::join(tasks, ", "));
  const GraphState graph = graph_state(session.graph());
  const checkpoint::Index index = checkpoint::read_index(path);
  std::map<std::string, const checkpoint::IndexEntry*> saved;
  for (auto& e : index.entries) saved.emplace(e.name, &e);
  const RestorePlan plan = plan_restore(graph, saved, path, fmt::format("{}/{}", path, checkpoint::kIndexFileName));

  RestoreReport report{path, index.global_step, {plan.wanted.begin(), plan.wanted.end()}, {}};
  for (auto& [name, entry] : saved)
    if (!plan.wanted.count(name)) report.extra.push_back(name);
  if (Master* master = cluster_master_of(session)) {
    auto assigned = restore_on_cluster(*master, graph, path, plan.requests, options.cluster_task_timeout, tasks);
    if (!tasks.empty()) report.restored = std::move(assigned);
    return report;
  }
  restore_locally(session, graph, path, plan);
  return report;
}

std::optional<std::string> latest_checkpoint(const std::string& dir) { return checkpoint::latest_checkpoint(dir); }

std::string named_checkpoint(const std::string& dir, const std::string& name) {
  return checkpoint::named_checkpoint(dir, name);
}

}  // namespace troupe
