#include "actors/session.hpp"

#include <algorithm>

#include <unistd.h>

#include "actors/device_actor.hpp"
#include "actors/runtime.hpp"
#include "actors/session_impl.hpp"
#include "actors/state/param_shard.hpp"
#include "actors/timeouts.hpp"
#include "actors/trace/slow_step_watch.hpp"
#include "actors/trace/trace_file.hpp"
#include "core/report.hpp"

namespace troupe {

// ---- what every session shares --------------------------------------------------------

SessionImpl::SessionImpl(std::shared_ptr<Graph> g, SessionOptions o) : graph(std::move(g)), options(std::move(o)) {
  runtime = Runtime::get(options.threads, options.inter_op_threads, options.intra_op_threads);
  shards = std::make_shared<ParamShards>(runtime->system(), graph, options.num_param_shards);
  if (!options.trace.file.empty()) {
    TROUPE_CHECK_ARG(options.trace.first_step <= options.trace.last_step,
                     "trace steps {}-{}: the first is after the last", options.trace.first_step, options.trace.last_step);
    static std::atomic<uint64_t> sessions{1};
    trace_key = (uint64_t(1) << 63) | sessions.fetch_add(1);  // apart from executables' keys
    trace = std::make_unique<TraceFile>(options.trace.file, options.trace.max_events);
    trace::set_limit(options.trace.max_events);
    char host[256] = "?";
    gethostname(host, sizeof host - 1);
    trace->add_process(1, options.target.empty() ? fmt::format("local (pid {} on {})", getpid(), host)
                                                 : fmt::format("session (pid {} on {})", getpid(), host));
  }
}

SessionImpl::~SessionImpl() = default;

void SessionImpl::start_watch() {
  if (options.slow_step_report.count() <= 0) return;
  std::function<void(const std::string&)> sink = options.on_slow_step ? options.on_slow_step : report_to_stderr;
  watch = std::make_unique<SlowStepWatch>(
      options.slow_step_report, [this](uint64_t step, const void* what) { return describe_step(step, what); },
      std::move(sink));
}

void SessionImpl::close() {
  {
    std::unique_lock<std::mutex> lock(mutex);
    slot_free.wait(lock, [&] { return in_flight == 0; });
  }
  watch.reset();
  if (trace && !traced_steps.empty()) {
    try {
      write_trace();
    } catch (const std::exception& e) {
      report_to_stderr(fmt::format("the session's trace was not written: {}", e.what()));
    }
  }
}

SessionImpl::StepSlot::StepSlot(SessionImpl& im) : im_(im) {
  std::unique_lock<std::mutex> lock(im_.mutex);
  im_.slot_free.wait(lock, [&] { return im_.in_flight < im_.options.max_steps_in_flight; });
  ++im_.in_flight;
}

SessionImpl::StepSlot::~StepSlot() {
  {
    std::lock_guard<std::mutex> lock(im_.mutex);
    --im_.in_flight;
  }
  im_.slot_free.notify_all();
}

bool SessionImpl::traces(uint64_t step, const RunOptions& run) const {
  if (run.trace && !trace)
    fail(ErrorCode::failed_precondition, "RunOptions::trace asks to trace step {}, but SessionOptions::trace.file "
                                         "names no file to write it to", step);
  return trace && (run.trace || (step >= options.trace.first_step && step <= options.trace.last_step));
}

void SessionImpl::end_traced_step(uint64_t step, trace::Moment start, trace::Moment end, const void* where,
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
    traced_steps.push_back({step, start.ns, end.ns, exe_key, where});
  }
  if (step == options.trace.last_step) write_trace();
}

void SessionImpl::write_trace() {
  if (!trace)
    fail(ErrorCode::failed_precondition, "write_trace: the session traces nothing (SessionOptions::trace.file is empty)");
  std::vector<TracedStep> steps;
  {
    std::lock_guard<std::mutex> lock(traced_mutex);
    steps.swap(traced_steps);
  }
  if (!steps.empty()) {
    // Every step at once: one pass over this process's buffers (the Session::run slices, a local
    // step's kernels), one request per signature to each of its tasks.
    int64_t from = steps.front().start, to = steps.front().end;
    std::vector<uint64_t> numbers;
    std::vector<trace::StepId> local;
    for (auto& s : steps) {
      from = std::min(from, s.start), to = std::max(to, s.end);
      numbers.push_back(s.step);
      local.push_back({trace_key, s.step});
      if (s.exe_key) local.push_back({s.exe_key, s.step});
    }
    const int64_t base = trace->base(from);
    std::vector<std::string> events = trace::take(local, from, to, base, 1);
    take_remote_trace(steps, base, *trace, events);
    trace->add_steps(numbers, std::move(events));
  }
  trace->write();
}

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

std::unique_ptr<SessionImpl> SessionImpl::make(std::shared_ptr<Graph> graph, SessionOptions options) {
  TROUPE_CHECK_ARG(graph != nullptr, "Session needs a graph");
  TROUPE_CHECK_ARG(options.max_steps_in_flight >= 1, "max_steps_in_flight must be at least 1, got {}",
                   options.max_steps_in_flight);
  if (options.target.empty()) return make_local_session(std::move(graph), std::move(options));
  return make_cluster_session(std::move(graph), std::move(options));
}

// ---- the Session ------------------------------------------------------------------------

namespace {

Endpoint resolve_tensor(const Graph& graph, const std::string& name, const char* role) {
  ParsedName p;
  try {
    p = parse_tensor_name(name);
  } catch (const Error& e) {
    fail(ErrorCode::invalid_argument, "{} '{}': {}", role, name, e.what());
  }
  if (p.control) fail(ErrorCode::invalid_argument, "{} '{}' names a control input, not a tensor", role, name);
  const Node* n = graph.find(p.node);
  if (!n) fail(ErrorCode::not_found, "{} '{}': no node named '{}' in the graph", role, name, p.node);
  if (p.port >= n->num_outputs())
    fail(ErrorCode::invalid_argument, "{} '{}': {} has {} output(s)", role, name, n->describe(), n->num_outputs());
  return {n->id, p.port};
}

int resolve_node(const Graph& graph, const std::string& name) {
  const Node* n = graph.find(name);
  if (!n) fail(ErrorCode::not_found, "target '{}': no node named so in the graph", name);
  return n->id;
}

// The feed `name` resolves to, refused unless `value` fits it.
Endpoint checked_feed(const Graph& graph, const std::string& name, const Tensor& value) {
  Endpoint e = resolve_tensor(graph, name, "feed");
  const Node& n = graph.node(e.node);
  if (!value.is_initialized()) fail(ErrorCode::invalid_argument, "feed '{}' is an empty tensor", name);
  if (value.dtype() != n.output_types[e.port])
    fail(ErrorCode::invalid_argument, "feed '{}' has dtype {}, but {} outputs {}", name, name_of(value.dtype()),
         n.describe(), name_of(n.output_types[e.port]));
  if (!n.output_shapes[e.port].compatible_with(value.shape()))
    fail(ErrorCode::invalid_argument, "feed '{}' has shape {}, but {} outputs shape {}", name,
         value.shape().to_string(), n.describe(), n.output_shapes[e.port].to_string());
  if (!value.host_accessible())
    fail(ErrorCode::invalid_argument, "feed '{}' is on {}; feed host tensors", name, value.device_name());
  return e;
}

}  // namespace

SessionImpl& session_impl(const Session& session) { return *session.impl_; }

Session::Session(std::shared_ptr<Graph> graph, SessionOptions options)
    : impl_(SessionImpl::make(std::move(graph), std::move(options))) {}

Session::Session(const Scope& scope, SessionOptions options) : Session(scope.graph_ptr(), options) {}

Session::~Session() { impl_->close(); }

std::vector<Tensor> Session::run(const FeedList& feeds, const std::vector<TensorName>& fetches,
                                 const std::vector<OpName>& targets, const RunOptions& options) {
  const Graph& g = *impl_->graph;
  std::vector<Endpoint> feed_points, fetch_points;
  std::vector<int> target_ids;
  std::vector<Tensor> feed_values;
  for (auto& [name, value] : feeds) {
    feed_points.push_back(checked_feed(g, name.name, value));
    feed_values.push_back(value);
  }
  for (auto& f : fetches) fetch_points.push_back(resolve_tensor(g, f.name, "fetch"));
  for (auto& t : targets) target_ids.push_back(resolve_node(g, t.name));
  StepResult result = impl_->run(feed_points, fetch_points, target_ids, std::move(feed_values), options);
  if (result.code != ErrorCode::ok) throw Error(result.code, std::move(result.message), std::move(result.device));
  return std::move(result.fetches);
}

void Session::prepare(const std::vector<TensorName>& feeds, const std::vector<TensorName>& fetches,
                      const std::vector<OpName>& targets) {
  const Graph& g = *impl_->graph;
  std::vector<Endpoint> feed_points, fetch_points;
  std::vector<int> target_ids;
  for (auto& f : feeds) feed_points.push_back(resolve_tensor(g, f.name, "feed"));
  for (auto& f : fetches) fetch_points.push_back(resolve_tensor(g, f.name, "fetch"));
  for (auto& t : targets) target_ids.push_back(resolve_node(g, t.name));
  impl_->prepare(feed_points, fetch_points, target_ids);
}

std::vector<WaitingNode> Session::waiting_nodes() const {
  std::vector<WaitingNode> out;
  for (auto& r : impl_->waits_now())
    out.push_back({std::move(r.node), r.tag.step, r.received, r.expected, std::move(r.missing)});
  return out;
}

std::string Session::describe_waiting() const { return impl_->describe_waiting(); }

std::vector<DeviceInfo> Session::devices() const {
  std::vector<DeviceInfo> out;
  Runtime& runtime = *impl_->runtime;
  caf::scoped_actor self{runtime.system()};
  for (auto& a : runtime.device_actors())
    self->request(a, timeouts::state_query(), stats_atom::value)
        .receive([&](DeviceStats& s) { out.push_back({s.name, s.description, s.bytes_in_use, s.peak_bytes}); },
                 [&](caf::error& e) {
                   fail(ErrorCode::unavailable, "a device actor did not answer: {}", runtime.system().render(e));
                 });
  return out;
}

Session::LoopState Session::loop_state() const { return impl_->loop_state(); }

std::vector<TaskTransfers> Session::transfer_stats() const { return impl_->transfer_stats(); }

void Session::write_trace() { impl_->write_trace(); }

int Session::num_executables() const { return impl_->num_executables(); }

int Session::steps_in_flight() const {
  std::lock_guard<std::mutex> lock(impl_->mutex);
  return impl_->in_flight;
}

std::vector<std::string> Session::variable_names() const {
  std::vector<std::string> names;
  Runtime& runtime = *impl_->runtime;
  caf::scoped_actor self{runtime.system()};
  for (int i = 0; i < impl_->shards->size(); ++i)
    self->request(impl_->shards->at(i), timeouts::state_query(), names_atom::value)
        .receive([&](std::vector<std::string>& n) { names.insert(names.end(), n.begin(), n.end()); },
                 [&](caf::error& e) {
                   fail(ErrorCode::unavailable, "parameter shard {} did not answer for its variable names: {}", i,
                        runtime.system().render(e));
                 });
  std::sort(names.begin(), names.end());
  return names;
}

const Graph& Session::graph() const { return *impl_->graph; }

const SessionOptions& Session::options() const { return impl_->options; }

}  // namespace troupe
