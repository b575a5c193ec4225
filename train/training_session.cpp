#include "train/training_session.hpp"

#include <errno.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <thread>

#include <fmt/format.h>

#include "actors/cluster/allreduce.hpp"
#include "actors/cluster/member.hpp"
#include "actors/state/saver.hpp"
#include "actors/cluster/supervisor.hpp"
#include "core/checkpoint.hpp"
#include "core/dtype_visit.hpp"
#include "core/fingerprint.hpp"
#include "core/report.hpp"
#include "graph/gradients.hpp"
#include "ops/all.hpp"
#include "ops/state/replica_device_setter.hpp"
#include "ops/state/sync_replicas.hpp"

namespace troupe::train {

Strategy parse_strategy(const std::string& name) {
  if (name == "local") return Strategy::local;
  if (name == "async" || name == "parameter_servers") return Strategy::parameter_servers;
  if (name == "sync" || name == "sync_replicas") return Strategy::sync_replicas;
  if (name == "allreduce") return Strategy::allreduce;
  fail(ErrorCode::invalid_argument, "'{}' is not a training strategy: local, async, sync or allreduce", name);
}

const char* name_of(Strategy strategy) {
  switch (strategy) {
    case Strategy::local: return "local";
    case Strategy::parameter_servers: return "async";
    case Strategy::sync_replicas: return "sync";
    case Strategy::allreduce: return "allreduce";
  }
  return "?";
}

namespace {

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// Averages the workers' summed gradients in their own floating dtype.
void scale_in_place(Tensor& t, double scale, const std::string& variable) {
  visit_dtype(t.dtype(), [&](auto zero) {
    using T = decltype(zero);
    if constexpr (std::is_floating_point_v<T>) {
      T* p = t.data<T>();
      for (int64_t k = 0, n = t.num_elements(); k < n; ++k) p[k] *= T(scale);
    } else {
      fail(ErrorCode::invalid_argument, "all-reduce training averages floating gradients; the gradient of '{}' is {}",
           variable, name_of(t.dtype()));
    }
  });
}

// A copy of `t` (element type From) as `to` (element type To).
template <class From, class To>
Tensor converted(const Tensor& t, DType to) {
  Tensor out(to, t.shape());
  const From* in = t.data<From>();
  To* p = out.data<To>();
  for (int64_t k = 0, n = t.num_elements(); k < n; ++k) p[k] = To(in[k]);
  return out;
}

}  // namespace

struct TrainingSession::Impl {
  ClusterConfig where;
  TrainingOptions options;
  Strategy strategy = Strategy::local;
  int workers = 1, ps = 0, replicas = 1;
  bool chief = true;
  std::string me;  // "worker:1", "local"

  // Lifetimes: the member outlives the group and the session; the session outlives the saver
  // and the supervisor (declaration order is destruction order, reversed).
  std::unique_ptr<ClusterMember> member;
  std::unique_ptr<AllReduceGroup> group;
  Scope root = Scope::root();
  Model model;
  ops::GlobalStep global_step_var{};
  Node* train_op = nullptr;
  std::optional<SyncTrainOp> sync;
  // allreduce: the gradients fetched, the averaged ones fed back, the update.
  std::vector<Output> variables, grads, averaged;
  std::vector<TensorName> fetches;
  Node* apply = nullptr;
  std::unique_ptr<Session> session;
  std::unique_ptr<Saver> saver;
  std::unique_ptr<Supervisor> supervisor;

  std::vector<std::shared_ptr<Hook>> hooks;
  std::vector<std::function<void(const std::string&, double, int64_t)>> sinks;
  int64_t global = 0;
  int64_t local_steps = 0;
  std::string resumed_from;
  bool begun = false, closed = false, stop = false;

  void say(const std::string& line) {
    if (options.on_message) return options.on_message(line);
    if (where.local()) std::printf("%s\n", line.c_str());
    else std::printf("%s: %s\n", me.c_str(), line.c_str());
    std::fflush(stdout);
  }

  std::function<void(const std::string&)> network_log() {
    if (options.on_network) return options.on_network;
    return [who = me](const std::string& line) {
      std::fprintf(stderr, "%s %s: %s\n", program_invocation_short_name, who.c_str(), line.c_str());
    };
  }

  template <class F>
  auto supervised(F&& f) -> decltype(f()) {
    return supervisor ? supervisor->run(std::forward<F>(f)) : f();
  }

  // "; to resume from DIR/ckpt-100, the newest intact one, run again with --restore-from ckpt-100"
  std::string resume_hint(const std::optional<std::string>& intact, bool before) const {
    if (!intact)
      return fmt::format("; no intact checkpoint {}is left in {}: move it aside to train from the start",
                         before ? "before it " : "", options.checkpoint_dir);
    return fmt::format("; to resume from {}, the newest intact one{}, run again with {} {}", *intact,
                       before ? " before it" : "", options.restore_from_flag,
                       std::filesystem::path(*intact).filename().string());
  }

  std::optional<std::string> checkpoint_to_resume() const {
    if (options.checkpoint_dir.empty()) return std::nullopt;
    if (!options.restore_from.empty()) return named_checkpoint(options.checkpoint_dir, options.restore_from);
    try {
      return latest_checkpoint(options.checkpoint_dir);
    } catch (const Error& e) {
      if (e.code() != ErrorCode::data_loss) throw;
      throw Error(e.code(), std::string(e.what()) +
                                resume_hint(checkpoint::newest_intact_checkpoint(options.checkpoint_dir), false));
    }
  }

  // Restores the newest checkpoint (or restore_from) and returns true, or returns false when there is none.
  bool restore() {
    std::optional<std::string> path = checkpoint_to_resume();
    if (!path) return false;
    try {
      global = saver->restore(*path).global_step;
    } catch (const DamagedCheckpoint& e) {
      throw Error(e.code(), std::string(e.what()) + resume_hint(e.intact(), true));
    }
    resumed_from = *path;
    return true;
  }

  void check_strategy() {
    if (where.local()) return;
    const TaskId& task = where.task();
    if (task.job != "worker")
      fail(ErrorCode::invalid_argument,
           "task {}: a training program runs the worker tasks (worker:0 is the chief; the ps tasks run troupe-node)",
           task.to_string());
    switch (strategy) {
      case Strategy::local:
        fail(ErrorCode::invalid_argument, "task {} of {}: the local strategy trains one process; choose async, sync "
             "or allreduce to train on a cluster", me, where.source());
      case Strategy::parameter_servers:
      case Strategy::sync_replicas:
        if (ps == 0)
          fail(ErrorCode::invalid_argument, "the {} strategy needs parameter servers, and the spec of {} has no ps job",
               name_of(strategy), where.source());
        break;
      case Strategy::allreduce:
        if (options.rejoin)
          fail(ErrorCode::invalid_argument, "task {}: an all-reduce job's ring is formed once, so a worker cannot "
               "rejoin it; start the job again (it resumes from its checkpoint)", me);
        break;
    }
    if (strategy == Strategy::sync_replicas && workers - options.backup_workers < 1)
      fail(ErrorCode::invalid_argument, "{} backup worker(s) leave no worker to aggregate ({} workers)",
           options.backup_workers, workers);
    if (strategy != Strategy::sync_replicas && options.backup_workers > 0)
      fail(ErrorCode::invalid_argument, "backup workers are for the sync strategy, not {}", name_of(strategy));
    replicas = train::replicas_per_step(where, options);
  }

  SessionOptions session_options() const {
    SessionOptions s;
    s.threads = options.threads;
    if (chief) s.trace.file = options.trace_file;
    return s;
  }

  void build_local(const Optimizer& optimizer) {
    model = build_model(root);
    global_step_var = ops::global_step(root);
    train_op = optimizer.minimize(root, model.loss, {}, global_step_var.value);
    make_session(session_options());
    if (!options.checkpoint_dir.empty()) {
      saver = std::make_unique<Saver>(*session, SaverOptions{.max_to_keep = options.max_to_keep});
      saver->check_directory(options.checkpoint_dir);
      if (restore()) say(fmt::format("resumed from global step {} of {}", global, resumed_from));
      else session->run({}, {}, {ops::global_variables_initializer(root)});
    } else {
      session->run({}, {}, {ops::global_variables_initializer(root)});
    }
  }

  Model build_model(const Scope& s) {
    Model m = model_fn(s);
    if (!m.loss.node())
      fail(ErrorCode::invalid_argument, "the model function returned no loss (Model::loss)");
    return m;
  }

  // After the whole graph is built: the train op's slots are variables the initialiser covers.
  void make_session(SessionOptions s) {
    session = std::make_unique<Session>(root, std::move(s));
  }

  void build_parameter_servers(const Optimizer& optimizer) {
    const bool is_sync = strategy == Strategy::sync_replicas;
    const std::string my_device = fmt::format("/job:worker/task:{}", where.task().index);
    auto s = root.with_device_function(replica_device_setter(ps, {.worker_device = my_device}));
    model = build_model(s);
    global_step_var = ops::global_step(s);
    if (is_sync) {
      SyncReplicasOptimizer sync_optimizer(optimizer, {.replicas_to_aggregate = replicas,
                                                       .total_replicas = workers,
                                                       .replica = where.task().index});
      sync = sync_optimizer.minimize(s, model.loss, global_step_var.value);
      train_op = sync->op;
    } else {
      train_op = optimizer.minimize(s, model.loss, {}, global_step_var.value);
    }
    SessionOptions so = session_options();
    so.target = "troupe://" + where.spec().address(where.task()).to_string();
    so.operation_timeout = options.step_timeout;
    so.cluster_startup_timeout = options.startup_timeout;
    so.tls = where.spec().tls_for(where.task());
    so.on_waiting = network_log();
    make_session(std::move(so));
    if (chief) saver = std::make_unique<Saver>(*session, SaverOptions{.max_to_keep = options.max_to_keep});
    if (chief && !options.checkpoint_dir.empty()) saver->check_directory(options.checkpoint_dir);

    // Every worker runs its steps under a supervisor: a ps task that dies and comes back gets its
    // variables back from the chief's newest checkpoint, and every worker goes on.
    SupervisorOptions supervision{.checkpoint_dir = chief ? options.checkpoint_dir : std::string(),
                          .grace = options.recovery_grace,
                          .on_recovery = [this](const Recovery& r) { say(r.describe()); }};
    supervision.on_waiting = [this](const std::string& line) { say(line); };
    if (is_sync && chief) {
      SupervisorOptions::SyncReplicas watch{.replicas_to_aggregate = replicas,
                                            .aggregate = sync->aggregate,
                                            .set_aggregate = sync->set_aggregate,
                                            .global_step = global_step_var.value,
                                            .last_step = options.last_step,
                                            .stop = sync->stop};
      for (int k = 0; k < workers; ++k) watch.tasks.push_back(fmt::format("worker:{}", k));
      supervision.sync = std::move(watch);
      supervision.on_replicas = [this](const std::string& line) { say(line); };
    }
    supervisor = std::make_unique<Supervisor>(*session, chief ? saver.get() : nullptr, std::move(supervision));

    // The chief initialises (the global step last: the others wait for it) or restores; the
    // others, and a chief that rejoins, wait until the global step can be read.
    auto read_global = [this] { return session->run({global_step_var.value})[0].scalar_value<int64_t>(); };
    if (chief && !options.rejoin) {
      if (!options.checkpoint_dir.empty() && restore()) {
        say(fmt::format("resumed from global step {} of {}", global, resumed_from));
      } else {
        std::vector<Output> all;
        for (auto& v : ops::global_variables(root.graph()))
          if (v.node()->name != global_step_var.value.node()->name) all.push_back(v);
        session->run({}, {}, {ops::variables_initializer(root.sub("init"), all)});
        session->run({}, {}, {global_step_var.init});
      }
    } else if (chief) {
      global = supervisor->run(read_global);
    } else {
      const auto start = Clock::now();
      const auto deadline = start + options.init_timeout;
      const double bound = std::chrono::duration<double>(options.init_timeout).count();
      WaitNotice notice;
      for (;;) {
        try {
          global = supervisor->run(read_global);  // (a ps task lost meanwhile is waited for)
          break;
        } catch (const Error& e) {
          if (e.code() != ErrorCode::failed_precondition || Clock::now() > deadline)
            fail(e.code(), "{} waited {:.1f} s (at most {:.0f} s) for the chief (worker:0) to initialise the variables: {}",
                 me, seconds_since(start), bound, e.what());
          if (notice.due())
            say(fmt::format("{}waiting for the chief (worker:0) to initialise the variables ({:.0f} s of at most {:.0f})",
                            notice.first() ? "" : "still ", seconds_since(start), bound));
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      }
    }
    if (options.rejoin) say(fmt::format("rejoined the job at global step {}", global));
  }

  void build_allreduce(const Optimizer& optimizer) {
    group = std::make_unique<AllReduceGroup>(
        *member, "worker", AllReduceOptions{.float16 = options.float16_allreduce, .timeout = options.step_timeout});
    model = build_model(root);
    global_step_var = ops::global_step(root);
    variables = ops::trainable_variables(root.graph());
    grads = gradients(root, {model.loss}, variables);
    for (std::size_t i = 0; i < variables.size(); ++i)
      averaged.push_back(ops::placeholder(root.with_op_name(fmt::format("averaged_gradient_{}", i)), grads[i].dtype(),
                                          grads[i].shape()));
    apply = optimizer.apply_gradients(root, averaged, variables, global_step_var.value);
    // The chief's values, handed to every worker: a sum where only the chief adds its own.
    std::vector<Output> incoming;
    std::vector<OpName> assigns;
    for (std::size_t i = 0; i < variables.size(); ++i) {
      incoming.push_back(ops::placeholder(root.with_op_name(fmt::format("chief_value_{}", i)), variables[i].dtype(),
                                          variables[i].shape()));
      assigns.push_back(ops::assign(root, variables[i], incoming.back()));
    }
    make_session(session_options());
    if (!options.checkpoint_dir.empty()) {
      saver = std::make_unique<Saver>(*session, SaverOptions{.max_to_keep = options.max_to_keep});
      if (chief) saver->check_directory(options.checkpoint_dir);  // the chief saves
    }
    // Every worker restores the newest checkpoint (slots included) or initialises; then the
    // chief's weights go to everyone, so all start from the same bits whatever their seeds.
    if (saver && restore()) say(fmt::format("resumed from global step {} of {}", global, resumed_from));
    else session->run({}, {}, {ops::global_variables_initializer(root)});
    std::vector<TensorName> names(variables.begin(), variables.end());
    std::vector<Tensor> values = session->run(names);
    for (auto& v : values) {
      v = v.copy();  // a buffer of our own (the shard's is shared)
      if (!chief) std::memset(v.raw_data(), 0, v.byte_size());
    }
    all_reduce(values);
    FeedList set;
    for (std::size_t i = 0; i < values.size(); ++i) set.push_back({incoming[i], values[i]});
    session->run(set, {}, assigns);
    fetches = {model.loss};
    fetches.insert(fetches.end(), grads.begin(), grads.end());
  }

  // The ring sums float32 and float64 (and integers); float16 tensors cross as float32.
  void all_reduce(std::vector<Tensor>& tensors) {
    std::vector<std::size_t> halves;
    for (std::size_t i = 0; i < tensors.size(); ++i)
      if (tensors[i].dtype() == DType::float16) {
        tensors[i] = converted<half, float>(tensors[i], DType::float32);
        halves.push_back(i);
      }
    group->all_reduce(tensors);
    for (std::size_t i : halves) tensors[i] = converted<float, half>(tensors[i], DType::float16);
  }

  StepInfo run_step(const data::Element& batch, const RunOptions& run) {
    if (batch.size() != model.inputs.size())
      fail(ErrorCode::invalid_argument, "{}: a batch of {} component(s) for the model's {} input(s) (Model::inputs)",
           me, batch.size(), model.inputs.size());
    FeedList feeds;
    for (std::size_t i = 0; i < batch.size(); ++i) feeds.push_back({model.inputs[i], batch[i]});
    StepInfo info;
    info.examples = batch.empty() ? model.examples_per_step : batch[0].shape().rank() > 0 ? batch[0].shape().dim(0) : 1;
    switch (strategy) {
      case Strategy::local:
      case Strategy::parameter_servers: {
        auto out = supervised([&] { return session->run(feeds, {model.loss, global_step_var.value}, {train_op}, run); });
        info.loss = out[0].scalar_value<float>();
        info.global_step = out[1].scalar_value<int64_t>() + 1;  // the read at the step's start, and this step's update
        break;
      }
      case Strategy::sync_replicas: {
        auto out = supervised([&] { return session->run(feeds, {model.loss, sync->next_step, sync->dropped}, {train_op}, run); });
        info.loss = out[0].scalar_value<float>();
        info.global_step = out[1].scalar_value<int64_t>();
        info.dropped = out[2].scalar_value<int64_t>();
        break;
      }
      case Strategy::allreduce: {
        std::vector<Tensor> out = session->run(feeds, fetches, {}, run);
        std::vector<Tensor> g(out.begin() + 1, out.end());
        all_reduce(g);
        FeedList in;
        const double scale = 1.0 / double(workers);
        for (std::size_t i = 0; i < g.size(); ++i) {
          scale_in_place(g[i], scale, variables[i].name());
          in.push_back({averaged[i], g[i]});
        }
        session->run(in, {}, {apply}, run);
        info.loss = out[0].scalar_value<float>();
        info.global_step = global + 1;
        break;
      }
    }
    global = info.global_step;
    if (supervisor) supervisor->saw_global_step(global);
    info.local_step = ++local_steps;
    if (!std::isfinite(info.loss))
      fail(ErrorCode::aborted, "{}: the loss diverged ({}) at global step {}", me, info.loss, global);
    return info;
  }

  ModelFn model_fn;
};

TrainingSession::TrainingSession(const ClusterConfig& where, Optimizer optimizer, ModelFn model_fn,
                                 TrainingOptions options)
    : impl_(std::make_unique<Impl>()) {
  Impl& m = *impl_;
  m.where = where;
  m.options = std::move(options);
  m.model_fn = std::move(model_fn);
  m.me = where.task_name();
  if (m.options.rejoin && !m.options.restore_from.empty())
    fail(ErrorCode::invalid_argument, "{}: a worker that rejoins restores nothing (restore_from '{}')", m.me,
         m.options.restore_from);
  if (where.local()) {
    if (m.options.rejoin) fail(ErrorCode::invalid_argument, "rejoin is for a worker of a cluster job");
    m.strategy = Strategy::local;
    m.build_local(optimizer);
    return;
  }
  m.strategy = m.options.strategy;
  m.workers = where.num_workers();
  m.ps = where.num_ps();
  m.chief = where.is_chief();
  m.check_strategy();
  // This process is its task's member: the ps tasks' peers, the partitions masters register.
  MemberOptions member{.threads = m.options.threads, .tls = where.spec().tls_for(where.task())};
  member.log = m.network_log();
  m.member = std::make_unique<ClusterMember>(where.spec(), where.task(), member);
  if (m.strategy == Strategy::allreduce) m.build_allreduce(optimizer);
  else m.build_parameter_servers(optimizer);
}

TrainingSession::~TrainingSession() = default;

const ClusterConfig& TrainingSession::where() const { return impl_->where; }
const TrainingOptions& TrainingSession::options() const { return impl_->options; }
Strategy TrainingSession::strategy() const { return impl_->strategy; }
bool TrainingSession::is_chief() const { return impl_->chief; }
int TrainingSession::num_workers() const { return impl_->workers; }
int TrainingSession::replicas_per_step() const { return impl_->replicas; }
const Model& TrainingSession::model() const { return impl_->model; }
int64_t TrainingSession::global_step() const { return impl_->global; }
const std::string& TrainingSession::resumed_from() const { return impl_->resumed_from; }
Session& TrainingSession::session() { return *impl_->session; }
bool TrainingSession::supervised() const { return impl_->supervisor != nullptr; }

int replicas_per_step(const ClusterConfig& where, const TrainingOptions& options) {
  if (where.local()) return 1;
  switch (options.strategy) {
    case Strategy::sync_replicas: return std::max(1, where.num_workers() - options.backup_workers);
    case Strategy::allreduce: return where.num_workers();
    default: return 1;
  }
}

int64_t steps_for_epochs(const ClusterConfig& where, const TrainingOptions& options, int epochs,
                         int64_t examples_per_epoch, int64_t batch) {
  const int64_t per_step = batch * replicas_per_step(where, options);
  return (int64_t(epochs) * examples_per_epoch + per_step - 1) / per_step;
}

data::Position TrainingSession::input_position(int64_t batches_per_epoch) const {
  TROUPE_CHECK_ARG(batches_per_epoch > 0, "input_position: {} batches per epoch", batches_per_epoch);
  const Impl& m = *impl_;
  const int64_t mine = m.where.local() ? m.global : m.global * m.replicas / m.workers;
  return {.epoch = mine / batches_per_epoch, .elements = mine % batches_per_epoch};
}

void TrainingSession::prepare() {
  Impl& m = *impl_;
  const std::vector<TensorName> feeds(m.model.inputs.begin(), m.model.inputs.end());
  switch (m.strategy) {
    case Strategy::local:
    case Strategy::parameter_servers:
      m.session->prepare(feeds, {m.model.loss, m.global_step_var.value}, {m.train_op});
      break;
    case Strategy::sync_replicas:
      m.session->prepare(feeds, {m.model.loss, m.sync->next_step, m.sync->dropped}, {m.train_op});
      break;
    case Strategy::allreduce:
      m.session->prepare(feeds, m.fetches);
      m.session->prepare(std::vector<TensorName>(m.averaged.begin(), m.averaged.end()), {}, {m.apply});
      break;
  }
  // The metrics fed their own inputs, or reading theirs in the graph (a model that reads its
  // training input in the graph too); metrics fed the training inputs are built at first use.
  if (m.model.metrics.empty() || (m.model.eval_inputs.empty() && !m.model.inputs.empty())) return;
  std::vector<TensorName> metrics;
  for (auto& [name, out] : m.model.metrics) metrics.push_back(out);
  m.session->prepare(std::vector<TensorName>(m.model.eval_inputs.begin(), m.model.eval_inputs.end()), metrics);
}

void TrainingSession::add_hook(std::shared_ptr<Hook> hook) {
  TROUPE_CHECK_ARG(hook != nullptr, "add_hook: no hook");
  impl_->hooks.push_back(std::move(hook));
  if (impl_->begun) impl_->hooks.back()->begin(*this);
}

void TrainingSession::begin() {
  if (impl_->begun) return;
  impl_->begun = true;
  for (std::size_t i = 0; i < impl_->hooks.size(); ++i) impl_->hooks[i]->begin(*this);
}

StepInfo TrainingSession::step(const data::Element& batch, const RunOptions& run) {
  begin();
  StepInfo info = impl_->run_step(batch, run);
  for (auto& h : impl_->hooks) h->after_step(*this, info);
  return info;
}

bool TrainingSession::should_stop() const {
  return impl_->stop || (impl_->options.last_step > 0 && impl_->global >= impl_->options.last_step);
}

void TrainingSession::request_stop() { impl_->stop = true; }

void TrainingSession::train(data::Iterator& input) {
  begin();
  while (!should_stop()) {
    std::optional<data::Element> batch = input.next();
    if (!batch) {
      if (impl_->options.last_step > 0)
        fail(ErrorCode::out_of_range, "{}: the input ended at global step {}, before the last step {}", impl_->me,
             impl_->global, impl_->options.last_step);
      break;
    }
    step(*batch);
  }
  close();
}

void TrainingSession::close() {
  Impl& m = *impl_;
  if (m.closed) return;
  m.closed = true;
  begin();
  // The end of a sync job: a straggler waiting on (or yet to start) a step after the last is let go.
  if (m.sync && m.chief) {
    m.supervisor->stop_watching_replicas();  // the others leave now: not lost replicas
    m.supervised([&] { m.session->run({}, {}, {m.sync->stop}); });
  }
  for (auto& h : m.hooks) h->end(*this);
}

std::vector<Tensor> TrainingSession::run(const FeedList& feeds, const std::vector<TensorName>& fetches) {
  return impl_->supervised([&] { return impl_->session->run(feeds, fetches); });
}

std::string TrainingSession::save() {
  Impl& m = *impl_;
  if (!m.saver || m.options.checkpoint_dir.empty() || !m.chief)
    fail(ErrorCode::failed_precondition, "{}: only the chief saves, into TrainingOptions::checkpoint_dir ({})", m.me,
         m.options.checkpoint_dir.empty() ? "not set" : m.options.checkpoint_dir);
  return m.supervised([&] { return m.saver->save(m.options.checkpoint_dir, m.global); });
}

std::future<std::string> TrainingSession::save_async() {
  Impl& m = *impl_;
  if (!m.saver || m.options.checkpoint_dir.empty() || !m.chief)
    fail(ErrorCode::failed_precondition, "{}: only the chief saves, into TrainingOptions::checkpoint_dir ({})", m.me,
         m.options.checkpoint_dir.empty() ? "not set" : m.options.checkpoint_dir);
  return m.saver->save_async(m.options.checkpoint_dir, m.global);
}

std::vector<int64_t> TrainingSession::dropped_per_worker() {
  Impl& m = *impl_;
  std::vector<int64_t> out;
  if (!m.sync) return out;
  std::vector<TensorName> counters(m.sync->dropped_counters.begin(), m.sync->dropped_counters.end());
  for (auto& t : run({}, counters)) out.push_back(t.scalar_value<int64_t>());
  return out;
}

uint64_t TrainingSession::weights_fingerprint() {
  std::vector<Output> vars = ops::trainable_variables(impl_->root.graph());
  std::vector<TensorName> names(vars.begin(), vars.end());
  uint64_t fingerprint = 0;
  for (auto& v : run({}, names))
    fingerprint = mix64(fingerprint ^ fnv1a64({static_cast<const char*>(v.raw_data()), v.byte_size()}));
  return fingerprint;
}

void TrainingSession::report_scalar(const std::string& tag, double value, int64_t step) {
  for (auto& sink : impl_->sinks) sink(tag, value, step);
}

void TrainingSession::add_scalar_sink(std::function<void(const std::string&, double, int64_t)> sink) {
  impl_->sinks.push_back(std::move(sink));
}

void TrainingSession::message(const std::string& line) { impl_->say(line); }

}  // namespace troupe::train
