#include "actors/session.hpp"

#include <algorithm>
#include <condition_variable>
#include <map>
#include <mutex>
#include <optional>

#include <unistd.h>

#include "actors/cluster/master.hpp"
#include "actors/device_actor.hpp"
#include "actors/executor/executable.hpp"
#include "actors/state/param_shard.hpp"
#include "actors/runtime.hpp"
#include "actors/trace/slow_step_watch.hpp"
#include "actors/timeouts.hpp"
#include "actors/trace/trace_file.hpp"
#include "actors/trace/wait_chain.hpp"
#include "core/report.hpp"
#include "core/trace.hpp"

namespace troupe {

struct Session::Impl {
  std::shared_ptr<Graph> graph;
  SessionOptions options;
  std::shared_ptr<Runtime> runtime;
  std::shared_ptr<ParamShards> shards;

  // Guards in_flight (with slot_free) and executables. Never held while an executable is built,
  // a step runs or an actor is asked: only around the map and the counter, taking no other lock
  // (but see the race in executable_for()).
  mutable std::mutex mutex;
  std::condition_variable slot_free;
  int in_flight = 0;
  std::map<std::string, std::shared_ptr<Executable>> executables;
  std::atomic<uint64_t> next_step{1};
  // A cluster session's (options.target): the master, and its signatures by key (under mutex).
  std::unique_ptr<Master> master;
  // Reports steps running past options.slow_step_report; destroyed before the master.
  std::unique_ptr<SlowStepWatch> watch;
  std::map<std::string, std::shared_ptr<Master::Signature>> signatures;
  // SessionOptions::trace: the file's events so far, and what names this session's own events
  // (the step slices) to the tracer.
  std::unique_ptr<TraceFile> trace;
  uint64_t trace_key = 0;
  bool traces(uint64_t step, const RunOptions& options) const {
    if (options.trace && !trace)
      fail(ErrorCode::failed_precondition, "RunOptions::trace asks to trace step {}, but SessionOptions::trace.file "
                                           "names no file to write it to", step);
    return trace && (options.trace || (step >= this->options.trace.first_step && step <= this->options.trace.last_step));
  }
  // A traced step that ended (from start to end on this process's clock): the session's slice of
  // it now; its events stay where they were recorded (this process's buffers, the tasks') until
  // the file is written (collect_traced_steps), so that tracing adds little to a step. Written
  // when it is the last step asked for.
  struct TracedStep {
    uint64_t step;
    int64_t start, end;
    Master::Signature* sig;  // a cluster step's; lives as long as the session
    uint64_t exe_key;        // a local step's executable
  };
  std::mutex traced_mutex;
  std::vector<TracedStep> traced_steps;  // ended, not yet in the file
  void end_traced_step(uint64_t step, trace::Moment start, trace::Moment end, Master::Signature* sig, uint64_t exe_key);
  // Takes the events of every traced step not yet taken into the file, and writes it.
  void write_trace();
  std::shared_ptr<Master::Signature> signature_for(const std::vector<Endpoint>& feeds,
                                                   const std::vector<Endpoint>& fetches, const std::vector<int>& targets);

  Endpoint resolve_tensor(const std::string& name, const char* role) const;
  int resolve_node(const std::string& name) const;
  std::shared_ptr<Executable> executable_for(const std::vector<Endpoint>& feeds,
                                             const std::vector<Endpoint>& fetches,
                                             const std::vector<int>& targets);
  // What the node actors of `exes` hold and wait for; every actor is asked at once and the
  // answers are awaited for at most `bound` (a node busy with a long kernel answers late). With
  // `step`, only that step's, which the actors are told is running (a _Recv then says which
  // value has not come).
  std::vector<WaitReport> waits_of(const std::vector<const Executable*>& exes, caf::duration bound,
                                   std::optional<uint64_t> step = std::nullopt) const;
  std::vector<WaitReport> waits_now() const;  // of every executable, each step
  // A step past its deadline: records who still waits, aborts it on every node, and returns
  // the deadline_exceeded result naming them.
  StepResult abort_late_step(const Executable& exe, uint64_t step, std::chrono::milliseconds timeout) const;

  // One of the max_steps_in_flight places a step takes, waited for and given back.
  class StepSlot {
   public:
    explicit StepSlot(Impl& im) : im_(im) {
      std::unique_lock<std::mutex> lock(im_.mutex);
      im_.slot_free.wait(lock, [&] { return im_.in_flight < im_.options.max_steps_in_flight; });
      ++im_.in_flight;
    }
    ~StepSlot() {
      {
        std::lock_guard<std::mutex> lock(im_.mutex);
        --im_.in_flight;
      }
      im_.slot_free.notify_all();
    }
    StepSlot(const StepSlot&) = delete;
    StepSlot& operator=(const StepSlot&) = delete;

   private:
    Impl& im_;
  };
};

namespace {

// What one step's waiting nodes say (this process is the only task).
std::string explain(std::vector<WaitReport> waits) { return explain_waits({TaskWaits{"", std::move(waits), true}}); }

}  // namespace

std::vector<WaitReport> Session::Impl::waits_of(const std::vector<const Executable*>& exes, caf::duration bound,
                                                std::optional<uint64_t> step) const {
  return ask_waits(runtime->system(), exes, bound, step);
}

StepResult Session::Impl::abort_late_step(const Executable& exe, uint64_t step,
                                          std::chrono::milliseconds timeout) const {
  const std::string waiting = explain(waits_of({&exe}, timeouts::late_step_report(), step));
  std::string message = fmt::format("step {} did not finish within its deadline of {} ms and was aborted; ", step,
                                    timeout.count());
  message += waiting.empty() ? "no node was waiting for inputs (kernels were still running)" : waiting;
  caf::anon_send(exe.step_actor(), abort_atom::value, Tag{step, 0, 0}, int32_t(ErrorCode::deadline_exceeded), message,
                 std::string());
  return StepResult{{}, ErrorCode::deadline_exceeded, std::move(message)};
}

Endpoint Session::Impl::resolve_tensor(const std::string& name, const char* role) const {
  ParsedName p;
  try {
    p = parse_tensor_name(name);
  } catch (const Error& e) {
    fail(ErrorCode::invalid_argument, "{} '{}': {}", role, name, e.what());
  }
  if (p.control) fail(ErrorCode::invalid_argument, "{} '{}' names a control input, not a tensor", role, name);
  const Node* n = graph->find(p.node);
  if (!n) fail(ErrorCode::not_found, "{} '{}': no node named '{}' in the graph", role, name, p.node);
  if (p.port >= n->num_outputs())
    fail(ErrorCode::invalid_argument, "{} '{}': {} has {} output(s)", role, name, n->describe(),
         n->num_outputs());
  return {n->id, p.port};
}

int Session::Impl::resolve_node(const std::string& name) const {
  const Node* n = graph->find(name);
  if (!n) fail(ErrorCode::not_found, "target '{}': no node named so in the graph", name);
  return n->id;
}

namespace {

std::string signature_key(const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                          const std::vector<int>& targets) {
  std::string key;
  for (auto& f : feeds) key += fmt::format("{}:{},", f.node, f.port);
  key += "|";
  for (auto& f : fetches) key += fmt::format("{}:{},", f.node, f.port);
  key += "|";
  for (int t : targets) key += fmt::format("{},", t);
  return key;
}

// The value cached under `key`, else what build() makes, stored there. Built outside the lock
// (`mutex` guards `cache`): another thread may build the same one; the first stored wins. A losing
// one is destroyed after the lock is released (an executable's destructor stops its actors and
// waits): try_emplace does not move from `built` when the key is there.
template <class T, class Build>
std::shared_ptr<T> cached(std::mutex& mutex, std::map<std::string, std::shared_ptr<T>>& cache, const std::string& key,
                          Build build) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    auto it = cache.find(key);
    if (it != cache.end()) return it->second;
  }
  std::shared_ptr<T> built = build();
  std::lock_guard<std::mutex> lock(mutex);
  return cache.try_emplace(key, std::move(built)).first->second;
}

}  // namespace

std::shared_ptr<Master::Signature> Session::Impl::signature_for(const std::vector<Endpoint>& feeds,
                                                                const std::vector<Endpoint>& fetches,
                                                                const std::vector<int>& targets) {
  return cached(mutex, signatures, signature_key(feeds, fetches, targets),
                [&] { return master->prepare(*graph, feeds, fetches, targets); });
}

std::shared_ptr<Executable> Session::Impl::executable_for(const std::vector<Endpoint>& feeds,
                                                          const std::vector<Endpoint>& fetches,
                                                          const std::vector<int>& targets) {
  return cached(mutex, executables, signature_key(feeds, fetches, targets), [&] {
    return std::make_shared<Executable>(runtime->system(), *graph, feeds, fetches, targets,
                                        [this](const std::string& v) { return shards->of(v); },
                                        ExecutableOptions{.allow_soft_placement = options.allow_soft_placement,
                                                          .runtime = runtime.get()});
  });
}

Session::Session(std::shared_ptr<Graph> graph, SessionOptions options) : impl_(new Impl) {
  TROUPE_CHECK_ARG(graph != nullptr, "Session needs a graph");
  TROUPE_CHECK_ARG(options.max_steps_in_flight >= 1, "max_steps_in_flight must be at least 1, got {}",
                   options.max_steps_in_flight);
  impl_->graph = std::move(graph);
  impl_->options = options;
  impl_->runtime = Runtime::get(options.threads, options.inter_op_threads, options.intra_op_threads);
  impl_->shards = std::make_shared<ParamShards>(impl_->runtime->system(), impl_->graph, options.num_param_shards);
  if (!options.target.empty()) {
    MasterOptions m;
    m.network = {options.heartbeat, options.connection_timeout, options.tls};
    m.startup_timeout = options.cluster_startup_timeout;
    m.allow_soft_placement = options.allow_soft_placement;
    m.float16_transfer = options.float16_transfer;
    m.on_waiting = options.on_waiting;
    impl_->master = std::make_unique<Master>(options.target, m);
  }
  if (options.slow_step_report.count() > 0) {
    std::function<void(const std::string&)> sink =
        options.on_slow_step ? options.on_slow_step : report_to_stderr;
    // A step is watched with its executable (local) or its signature (cluster): both live as
    // long as the session, and the watch goes first.
    auto report = [im = impl_.get()](uint64_t step, const void* what) -> std::string {
      if (im->master) return im->master->describe_step(*static_cast<Master::Signature*>(const_cast<void*>(what)), step);
      return explain(im->waits_of({static_cast<const Executable*>(what)}, timeouts::late_step_report(), step));
    };
    impl_->watch = std::make_unique<SlowStepWatch>(options.slow_step_report, std::move(report), std::move(sink));
  }
  if (!options.trace.file.empty()) {
    TROUPE_CHECK_ARG(options.trace.first_step <= options.trace.last_step,
                     "trace steps {}-{}: the first is after the last", options.trace.first_step, options.trace.last_step);
    static std::atomic<uint64_t> sessions{1};
    impl_->trace_key = (uint64_t(1) << 63) | sessions.fetch_add(1);  // apart from executables' keys
    impl_->trace = std::make_unique<TraceFile>(options.trace.file, options.trace.max_events);
    trace::set_limit(options.trace.max_events);
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    impl_->trace->add_process(1, options.target.empty() ? fmt::format("local (pid {} on {})", getpid(), host)
                                                        : fmt::format("session (pid {} on {})", getpid(), host));
  }
}

void Session::Impl::end_traced_step(uint64_t step, trace::Moment start, trace::Moment end, Master::Signature* sig,
                                    uint64_t exe_key) {
  trace::Event e;
  e.key = trace_key;
  e.step = step;
  e.ts = start.ticks;
  e.dur = end.ticks - start.ticks;
  e.name = trace::intern(fmt::format("step {}", step));
  e.cat = trace::Category::step;
  e.row = trace::named_row("Session::run");
  trace::record(e);
  {
    std::lock_guard<std::mutex> lock(traced_mutex);
    traced_steps.push_back({step, start.ns, end.ns, sig, exe_key});
  }
  if (step == options.trace.last_step) write_trace();
}

void Session::Impl::write_trace() {
  std::vector<TracedStep> steps;
  {
    std::lock_guard<std::mutex> lock(traced_mutex);
    steps.swap(traced_steps);
  }
  if (!steps.empty()) {
    // Every step at once: one pass over this process's buffers, one request per signature to
    // each of its tasks.
    int64_t from = steps.front().start, to = steps.front().end;
    std::vector<uint64_t> numbers;
    std::vector<trace::StepId> local;  // this process's: the Session::run slices, a local step's kernels
    struct Window {
      std::vector<uint64_t> steps;
      int64_t from, to;
    };
    std::map<Master::Signature*, Window> by_signature;
    for (auto& s : steps) {
      from = std::min(from, s.start), to = std::max(to, s.end);
      numbers.push_back(s.step);
      local.push_back({trace_key, s.step});
      if (s.exe_key) local.push_back({s.exe_key, s.step});
      if (s.sig) {
        Window& w = by_signature.try_emplace(s.sig, Window{{}, s.start, s.end}).first->second;
        w.steps.push_back(s.step);
        w.from = std::min(w.from, s.start), w.to = std::max(w.to, s.end);
      }
    }
    const int64_t base = trace->base(from);
    std::vector<std::string> events = trace::take(local, from, to, base, 1);
    for (auto& [sig, w] : by_signature) {
      TraceParts parts = master->take_trace(*sig, w.steps, w.from, w.to, base);
      for (auto& p : parts.processes) {
        trace->add_process(p.pid, fmt::format("{} at {}", p.task, p.address));
        trace->add_clock(p.task, p.clock_offset_ns, p.clock_error_ns);
      }
      for (auto& m : parts.missing)
        trace->add_note(fmt::format("steps {}: no events from {}", fmt::join(w.steps, ", "), m));
      events.insert(events.end(), std::make_move_iterator(parts.lines.begin()), std::make_move_iterator(parts.lines.end()));
    }
    trace->add_steps(numbers, std::move(events));
  }
  trace->write();
}

Session::Session(const Scope& scope, SessionOptions options) : Session(scope.graph_ptr(), options) {}

Session::~Session() {
  {
    std::unique_lock<std::mutex> lock(impl_->mutex);
    impl_->slot_free.wait(lock, [&] { return impl_->in_flight == 0; });
  }
  impl_->watch.reset();
  if (impl_->trace && !impl_->traced_steps.empty()) {
    try {
      impl_->write_trace();
    } catch (const std::exception& e) {
      report_to_stderr(fmt::format("the session's trace was not written: {}", e.what()));
    }
  }
  impl_->executables.clear();
  impl_->signatures.clear();
  impl_->master.reset();
  impl_->shards.reset();
}

std::vector<Tensor> Session::run(const FeedList& feeds, const std::vector<TensorName>& fetches,
                                 const std::vector<OpName>& targets, const RunOptions& options) {
  Impl& im = *impl_;
  std::vector<Endpoint> feed_points, fetch_points;
  std::vector<int> target_ids;
  std::vector<Tensor> feed_values;
  for (auto& [name, value] : feeds) {
    Endpoint e = im.resolve_tensor(name.name, "feed");
    const Node& n = im.graph->node(e.node);
    if (!value.is_initialized())
      fail(ErrorCode::invalid_argument, "feed '{}' is an empty tensor", name.name);
    if (value.dtype() != n.output_types[e.port])
      fail(ErrorCode::invalid_argument, "feed '{}' has dtype {}, but {} outputs {}", name.name,
           name_of(value.dtype()), n.describe(), name_of(n.output_types[e.port]));
    if (!n.output_shapes[e.port].compatible_with(value.shape()))
      fail(ErrorCode::invalid_argument, "feed '{}' has shape {}, but {} outputs shape {}", name.name,
           value.shape().to_string(), n.describe(), n.output_shapes[e.port].to_string());
    if (!value.host_accessible())
      fail(ErrorCode::invalid_argument, "feed '{}' is on {}; feed host tensors", name.name,
           value.device_name());
    feed_points.push_back(e);
    feed_values.push_back(value);
  }
  for (auto& f : fetches) fetch_points.push_back(im.resolve_tensor(f.name, "fetch"));
  for (auto& t : targets) target_ids.push_back(im.resolve_node(t.name));

  if (im.master) {
    auto sig = im.signature_for(feed_points, fetch_points, target_ids);
    Impl::StepSlot slot(im);
    const auto timeout = options.timeout.count() > 0 ? options.timeout : im.options.operation_timeout;
    const uint64_t step = im.next_step.fetch_add(1);
    const bool traced = im.traces(step, options);
    std::optional<SlowStepWatch::Watched> watched;
    if (im.watch) watched.emplace(im.watch->watch(step, sig.get()));
    const trace::Moment start = traced ? trace::moment() : trace::Moment{};
    StepResult result = im.master->run(*sig, step, std::move(feed_values), timeout, traced);
    if (traced) im.end_traced_step(step, start, trace::moment(), sig.get(), 0);
    if (result.code != ErrorCode::ok) throw Error(result.code, std::move(result.message), std::move(result.device));
    return std::move(result.fetches);
  }
  auto exe = im.executable_for(feed_points, fetch_points, target_ids);
  StepResult result;
  {
    Impl::StepSlot slot(im);
    const auto timeout = options.timeout.count() > 0 ? options.timeout : im.options.operation_timeout;
    caf::scoped_actor self{im.runtime->system()};
    uint64_t step = im.next_step.fetch_add(1);
    std::optional<SlowStepWatch::Watched> watched;
    if (im.watch) watched.emplace(im.watch->watch(step, exe.get()));
    const bool traced = im.traces(step, options) && trace::begin(exe->trace_key(), step);
    const trace::Moment start = traced ? trace::moment() : trace::Moment{};
    bool timed_out = false;
    self->request(exe->step_actor(), timeouts::step(timeout), run_atom::value, step, std::move(feed_values))
        .receive([&](StepResult& r) { result = std::move(r); },
                 [&](caf::error& e) {
                   if (e == caf::sec::request_timeout) {
                     timed_out = true;
                     return;
                   }
                   result.code = ErrorCode::internal;
                   result.message = fmt::format("the step actor did not answer step {}: {}", step,
                                                im.runtime->system().render(e));
                 });
    if (timed_out) result = im.abort_late_step(*exe, step, timeout);
    exe->step_ended();
    if (traced) {
      const trace::Moment end = trace::moment();
      trace::end(exe->trace_key(), step);
      im.end_traced_step(step, start, end, nullptr, exe->trace_key());
    }
  }
  if (result.code != ErrorCode::ok) throw Error(result.code, std::move(result.message), std::move(result.device));
  return std::move(result.fetches);
}

void Session::prepare(const std::vector<TensorName>& feeds, const std::vector<TensorName>& fetches,
                      const std::vector<OpName>& targets) {
  std::vector<Endpoint> feed_points, fetch_points;
  std::vector<int> target_ids;
  for (auto& f : feeds) feed_points.push_back(impl_->resolve_tensor(f.name, "feed"));
  for (auto& f : fetches) fetch_points.push_back(impl_->resolve_tensor(f.name, "fetch"));
  for (auto& t : targets) target_ids.push_back(impl_->resolve_node(t.name));
  if (impl_->master) impl_->signature_for(feed_points, fetch_points, target_ids);
  else impl_->executable_for(feed_points, fetch_points, target_ids);
}

std::vector<WaitReport> Session::Impl::waits_now() const {
  std::vector<std::shared_ptr<Executable>> exes;  // kept alive while their actors are asked
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [k, e] : executables) exes.push_back(e);
  }
  std::vector<const Executable*> asked;
  for (auto& e : exes) asked.push_back(e.get());
  return waits_of(asked, timeouts::state_query());
}

std::vector<WaitingNode> Session::waiting_nodes() const {
  std::vector<WaitingNode> out;
  for (auto& r : impl_->waits_now())
    out.push_back({std::move(r.node), r.tag.step, r.received, r.expected, std::move(r.missing)});
  return out;
}

std::string Session::describe_waiting() const {
  if (impl_->master) return impl_->master->describe_running();
  std::map<uint64_t, std::vector<WaitReport>> by_step;
  for (auto& r : impl_->waits_now()) by_step[r.tag.step].push_back(std::move(r));
  std::string s;
  for (auto& [step, waits] : by_step) s += fmt::format("step {}: {}\n", step, explain(std::move(waits)));
  return s;
}

std::vector<DeviceInfo> Session::devices() const {
  std::vector<DeviceInfo> out;
  caf::scoped_actor self{impl_->runtime->system()};
  for (auto& a : impl_->runtime->device_actors())
    self->request(a, timeouts::state_query(), stats_atom::value)
        .receive([&](DeviceStats& s) { out.push_back({s.name, s.description, s.bytes_in_use, s.peak_bytes}); },
                 [&](caf::error& e) {
                   fail(ErrorCode::unavailable, "a device actor did not answer: {}",
                        impl_->runtime->system().render(e));
                 });
  return out;
}

Session::LoopState Session::loop_state() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  LoopState state;
  for (auto& [key, exe] : impl_->executables) {
    for (auto& part : exe->parts()) {
      state.frames += part->frames.size();
      state.saved_values += part->stacks.size();
    }
  }
  return state;
}

std::vector<TaskTransfers> Session::transfer_stats() const {
  return impl_->master ? impl_->master->transfer_stats() : std::vector<TaskTransfers>{};
}

void Session::write_trace() {
  if (!impl_->trace)
    fail(ErrorCode::failed_precondition, "write_trace: the session traces nothing (SessionOptions::trace.file is empty)");
  impl_->write_trace();
}

int Session::num_executables() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return int(impl_->executables.size());
}

int Session::steps_in_flight() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->in_flight;
}

std::vector<std::string> Session::variable_names() const {
  std::vector<std::string> names;
  caf::scoped_actor self{impl_->runtime->system()};
  for (int i = 0; i < impl_->shards->size(); ++i)
    self->request(impl_->shards->at(i), timeouts::state_query(), names_atom::value)
        .receive([&](std::vector<std::string>& n) { names.insert(names.end(), n.begin(), n.end()); },
                 [&](caf::error& e) {
                   fail(ErrorCode::unavailable, "parameter shard {} did not answer for its variable names: {}", i,
                        impl_->runtime->system().render(e));
                 });
  std::sort(names.begin(), names.end());
  return names;
}

const Graph& Session::graph() const { return *impl_->graph; }

const std::shared_ptr<Runtime>& Session::runtime() const { return impl_->runtime; }

const std::shared_ptr<ParamShards>& Session::param_shards() const { return impl_->shards; }

Master* Session::cluster_master() const { return impl_->master.get(); }

const SessionOptions& Session::options() const { return impl_->options; }

}  // namespace troupe
