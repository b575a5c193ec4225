// LocalSession (session_impl.hpp): every partition of a signature in this process, one Executable
// per run signature, run by its step actor.
#include <map>
#include <optional>

#include "actors/executor/executable.hpp"
#include "actors/runtime.hpp"
#include "actors/session_impl.hpp"
#include "actors/state/param_shard.hpp"
#include "actors/timeouts.hpp"
#include "actors/trace/slow_step_watch.hpp"
#include "actors/trace/wait_chain.hpp"

namespace troupe {

namespace {

// What one step's waiting nodes say (this process is the only task).
std::string explain(std::vector<WaitReport> waits) { return explain_waits({TaskWaits{"", std::move(waits), true}}); }

class LocalSession final : public SessionImpl {
 public:
  LocalSession(std::shared_ptr<Graph> graph, SessionOptions options)
      : SessionImpl(std::move(graph), std::move(options)) {
    start_watch();
  }

  StepResult run(const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                 const std::vector<int>& targets, std::vector<Tensor> feed_values, const RunOptions& run) override;
  void prepare(const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
               const std::vector<int>& targets) override {
    executable_for(feeds, fetches, targets);
  }
  std::vector<WaitReport> waits_now() const override;
  std::string describe_waiting() const override;
  Session::LoopState loop_state() const override;
  int num_executables() const override {
    std::lock_guard<std::mutex> lock(mutex);
    return int(executables_.size());
  }
  std::vector<TaskTransfers> transfer_stats() const override { return {}; }
  Master* master() const override { return nullptr; }

 private:
  std::map<std::string, std::shared_ptr<Executable>> executables_;  // under `mutex`

  std::shared_ptr<Executable> executable_for(const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                                             const std::vector<int>& targets);
  // A step past its deadline: records who still waits, aborts it on every node, and returns
  // the deadline_exceeded result naming them.
  StepResult abort_late_step(const Executable& exe, uint64_t step, std::chrono::milliseconds timeout) const;
  std::string describe_step(uint64_t step, const void* what) const override {
    return explain(ask_waits(runtime->system(), {static_cast<const Executable*>(what)}, timeouts::late_step_report(),
                             step));
  }
  void take_remote_trace(const std::vector<TracedStep>&, int64_t, TraceFile&, std::vector<std::string>&) override {}
};

std::shared_ptr<Executable> LocalSession::executable_for(const std::vector<Endpoint>& feeds,
                                                         const std::vector<Endpoint>& fetches,
                                                         const std::vector<int>& targets) {
  return cached(mutex, executables_, signature_key(feeds, fetches, targets), [&] {
    return std::make_shared<Executable>(runtime->system(), *graph, feeds, fetches, targets,
                                        [this](const std::string& v) { return shards->of(v); },
                                        ExecutableOptions{.allow_soft_placement = options.allow_soft_placement,
                                                          .runtime = runtime.get()});
  });
}

StepResult LocalSession::abort_late_step(const Executable& exe, uint64_t step, std::chrono::milliseconds timeout) const {
  const std::string waiting = explain(ask_waits(runtime->system(), {&exe}, timeouts::late_step_report(), step));
  std::string message = fmt::format("step {} did not finish within its deadline of {} ms and was aborted; ", step,
                                    timeout.count());
  message += waiting.empty() ? "no node was waiting for inputs (kernels were still running)" : waiting;
  caf::anon_send(exe.step_actor(), abort_atom::value, Tag{step, 0, 0}, int32_t(ErrorCode::deadline_exceeded), message,
                 std::string());
  return StepResult{{}, ErrorCode::deadline_exceeded, std::move(message)};
}

StepResult LocalSession::run(const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                             const std::vector<int>& targets, std::vector<Tensor> feed_values, const RunOptions& run) {
  auto exe = executable_for(feeds, fetches, targets);
  StepResult result;
  StepSlot slot(*this);
  const auto timeout = run.timeout.count() > 0 ? run.timeout : options.operation_timeout;
  caf::scoped_actor self{runtime->system()};
  const uint64_t step = next_step.fetch_add(1);
  std::optional<SlowStepWatch::Watched> watched;
  if (watch) watched.emplace(watch->watch(step, exe.get()));
  const bool traced = traces(step, run) && trace::begin(exe->trace_key(), step);
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
                 result.message =
                     fmt::format("the step actor did not answer step {}: {}", step, runtime->system().render(e));
               });
  if (timed_out) result = abort_late_step(*exe, step, timeout);
  exe->step_ended();
  if (traced) {
    const trace::Moment end = trace::moment();
    trace::end(exe->trace_key(), step);
    end_traced_step(step, start, end, nullptr, exe->trace_key());
  }
  return result;
}

std::vector<WaitReport> LocalSession::waits_now() const {
  std::vector<std::shared_ptr<Executable>> exes;  // kept alive while their actors are asked
  {
    std::lock_guard<std::mutex> lock(mutex);
    for (auto& [k, e] : executables_) exes.push_back(e);
  }
  std::vector<const Executable*> asked;
  for (auto& e : exes) asked.push_back(e.get());
  return ask_waits(runtime->system(), asked, timeouts::state_query());
}

std::string LocalSession::describe_waiting() const {
  std::map<uint64_t, std::vector<WaitReport>> by_step;
  for (auto& r : waits_now()) by_step[r.tag.step].push_back(std::move(r));
  std::string s;
  for (auto& [step, waits] : by_step) s += fmt::format("step {}: {}\n", step, explain(std::move(waits)));
  return s;
}

Session::LoopState LocalSession::loop_state() const {
  std::lock_guard<std::mutex> lock(mutex);
  Session::LoopState state;
  for (auto& [key, exe] : executables_) {
    for (auto& part : exe->parts()) {
      state.frames += part->frames.size();
      state.saved_values += part->stacks.size();
    }
  }
  return state;
}

}  // namespace

std::unique_ptr<SessionImpl> make_local_session(std::shared_ptr<Graph> graph, SessionOptions options) {
  return std::make_unique<LocalSession>(std::move(graph), std::move(options));
}

}  // namespace troupe
