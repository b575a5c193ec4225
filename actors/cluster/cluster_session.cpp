// ClusterSession (actors/session_impl.hpp): the graph runs on a cluster of troupe-node processes.
// Each run signature is placed over every task's devices and registered with each task once
// (Master::prepare); a step runs over all of them (Master::run).
#include <map>
#include <optional>

#include "actors/cluster/master.hpp"
#include "actors/session_impl.hpp"
#include "actors/trace/slow_step_watch.hpp"
#include "actors/trace/trace_file.hpp"

namespace troupe {
namespace {

class ClusterSession final : public SessionImpl {
 public:
  ClusterSession(std::shared_ptr<Graph> graph, SessionOptions options);

  StepResult run(const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                 const std::vector<int>& targets, std::vector<Tensor> feed_values, const RunOptions& run) override;
  void prepare(const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
               const std::vector<int>& targets) override {
    signature_for(feeds, fetches, targets);
  }
  // Only the tasks' node actors hold the steps: this process has none.
  std::vector<WaitReport> waits_now() const override { return {}; }
  std::string describe_waiting() const override { return master_->describe_running(); }
  Session::LoopState loop_state() const override { return {}; }
  int num_executables() const override { return 0; }
  std::vector<TaskTransfers> transfer_stats() const override { return master_->transfer_stats(); }
  Master* master() const override { return master_.get(); }

 private:
  // Declared before the signatures, which go first.
  std::unique_ptr<Master> master_;
  std::map<std::string, std::shared_ptr<Master::Signature>> signatures_;  // under `mutex`

  std::shared_ptr<Master::Signature> signature_for(const std::vector<Endpoint>& feeds,
                                                   const std::vector<Endpoint>& fetches,
                                                   const std::vector<int>& targets) {
    return cached(mutex, signatures_, signature_key(feeds, fetches, targets),
                  [&] { return master_->prepare(*graph, feeds, fetches, targets); });
  }
  std::string describe_step(uint64_t step, const void* what) const override {
    return master_->describe_step(*static_cast<Master::Signature*>(const_cast<void*>(what)), step);
  }
  void take_remote_trace(const std::vector<TracedStep>& steps, int64_t base, TraceFile& file,
                         std::vector<std::string>& events) override;
};

ClusterSession::ClusterSession(std::shared_ptr<Graph> graph, SessionOptions options)
    : SessionImpl(std::move(graph), std::move(options)) {
  MasterOptions m;
  m.network = {this->options.heartbeat, this->options.connection_timeout, this->options.tls};
  m.startup_timeout = this->options.cluster_startup_timeout;
  m.allow_soft_placement = this->options.allow_soft_placement;
  m.float16_transfer = this->options.float16_transfer;
  m.on_waiting = this->options.on_waiting;
  master_ = std::make_unique<Master>(this->options.target, m);
  start_watch();
}

StepResult ClusterSession::run(const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                               const std::vector<int>& targets, std::vector<Tensor> feed_values,
                               const RunOptions& run) {
  auto sig = signature_for(feeds, fetches, targets);
  StepSlot slot(*this);
  const auto timeout = run.timeout.count() > 0 ? run.timeout : options.operation_timeout;
  const uint64_t step = next_step.fetch_add(1);
  const bool traced = traces(step, run);
  std::optional<SlowStepWatch::Watched> watched;
  if (watch) watched.emplace(watch->watch(step, sig.get()));
  const trace::Moment start = traced ? trace::moment() : trace::Moment{};
  StepResult result = master_->run(*sig, step, std::move(feed_values), timeout, traced);
  if (traced) end_traced_step(step, start, trace::moment(), sig.get(), 0);
  return result;
}

void ClusterSession::take_remote_trace(const std::vector<TracedStep>& steps, int64_t base, TraceFile& file,
                                       std::vector<std::string>& events) {
  struct Window {
    std::vector<uint64_t> steps;
    int64_t from, to;
  };
  std::map<const void*, Window> by_signature;
  for (auto& s : steps) {
    Window& w = by_signature.try_emplace(s.where, Window{{}, s.start, s.end}).first->second;
    w.steps.push_back(s.step);
    w.from = std::min(w.from, s.start), w.to = std::max(w.to, s.end);
  }
  for (auto& [where, w] : by_signature) {
    auto& sig = *static_cast<Master::Signature*>(const_cast<void*>(where));
    TraceParts parts = master_->take_trace(sig, w.steps, w.from, w.to, base);
    for (auto& p : parts.processes) {
      file.add_process(p.pid, fmt::format("{} at {}", p.task, p.address));
      file.add_clock(p.task, p.clock_offset_ns, p.clock_error_ns);
    }
    for (auto& m : parts.missing) file.add_note(fmt::format("steps {}: no events from {}", fmt::join(w.steps, ", "), m));
    events.insert(events.end(), std::make_move_iterator(parts.lines.begin()), std::make_move_iterator(parts.lines.end()));
  }
}

}  // namespace

std::unique_ptr<SessionImpl> make_cluster_session(std::shared_ptr<Graph> graph, SessionOptions options) {
  return std::make_unique<ClusterSession>(std::move(graph), std::move(options));
}

}  // namespace troupe
