#include "actors/executor/step_actor.hpp"

#include "actors/executor/executable.hpp"
#include "actors/executor/node.hpp"

namespace troupe {

void StepActorState::remember_ended(uint64_t step) {
  if (!ended.insert(step).second) return;
  ended_order.push_back(step);
  if (ended_order.size() > 4096) {
    ended.erase(ended_order.front());
    ended_order.pop_front();
  }
}

namespace {

using StepSelf = StepActor::stateful_pointer<StepActorState>;

// -- steps --

// Answers `step` with `result` and forgets it, with what its partitions keep of it.
void finish(StepSelf self, uint64_t step, StepResult result) {
  auto it = self->state.steps.find(step);
  if (it == self->state.steps.end()) return;
  const bool failed = result.code != ErrorCode::ok;
  it->second.promise.deliver(std::move(result));
  self->state.steps.erase(it);
  self->state.remember_ended(step);
  for (auto& part : self->state.plan->parts) {
    part->stacks.drop_step(step);  // what a loop saved for a gradient the step did not run
    // A failed step's frames go now (its loops will not exit); a finished step's loops may
    // still be passing their last, dead, iterations, and their Exits free their frames.
    if (failed) part->frames.drop_step(step);
  }
}

// A report (a fetched value, or a target's or root _Send's signal) of a running step.
void report(StepSelf self, uint64_t step, uint32_t slot, Value& value) {
  auto it = self->state.steps.find(step);
  if (it == self->state.steps.end()) return;
  auto& s = it->second;
  if (slot != kControlSlot) {
    if (value.dead) {
      finish(self, step, StepResult{{}, ErrorCode::invalid_argument,
                                    "fetch '" + self->state.plan->fetch_names[slot] + "' was not computed: it is on an untaken branch"});
      return;
    }
    s.fetches[slot] = std::move(value.tensor);
  }
  if (--s.remaining == 0) finish(self, step, StepResult{std::move(s.fetches), ErrorCode::ok, {}});
}

caf::result<StepResult> on_run(StepSelf self, uint64_t step, std::vector<Tensor>& feeds) {
  const StepPlan& p = *self->state.plan;
  const int due = p.num_fetches + p.num_targets + p.num_awaited_sends;
  caf::result<StepResult> answer = StepResult{};
  if (due > 0) {
    auto& s = self->state.steps[step];
    s.promise = self->make_response_promise<StepResult>();
    s.fetches.resize(std::size_t(p.num_fetches));
    s.remaining = due;
    answer = s.promise;
  } else {
    self->state.remember_ended(step);
  }
  Tag tag{step, 0, 0};
  for (std::size_t i = 0; i < p.args.size(); ++i)
    send_to_node(self->context(), *p.parts[p.args[i].part], p.args[i].node, tag, 0, Value{std::move(feeds[i]), false});
  for (auto& part : p.parts)
    for (int src : part->sources) send_to_node(self->context(), *part, src, tag, kControlSlot, Value{});
  // Reports that came before the step did (values from elsewhere start work here before
  // this share of the step is run).
  auto early = self->state.early.find(step);
  if (early != self->state.early.end()) {
    auto reports = std::move(early->second);
    self->state.early.erase(early);
    for (auto& [slot, value] : reports) report(self, step, slot, value);
  }
  return answer;
}

void on_input(StepSelf self, const Tag& tag, uint32_t slot, Value& value) {
  auto& st = self->state;
  if (!st.steps.count(tag.step) && st.plan->rendezvous->shared() && !st.ended.count(tag.step)) {
    st.early[tag.step].emplace_back(slot, std::move(value));  // its run comes next
    return;
  }
  report(self, tag.step, slot, value);
}

// -- failures --

void on_abort(StepSelf self, const Tag& tag, int32_t code, std::string& message, std::string& device) {
  if (!self->state.steps.count(tag.step)) {
    // Answered already (a shared step's share): the error still fails the step.
    if (!self->state.plan->rendezvous->shared()) return;
    self->state.early.erase(tag.step);
    self->state.remember_ended(tag.step);
    self->state.plan->rendezvous->abort(tag, ErrorCode(code), std::move(message), std::move(device));
    for (auto& part : self->state.plan->parts) {
      part->frames.drop_step(tag.step);
      for (auto& a : part->actors)
        if (a) caf::anon_send(a, abort_atom::value, tag.step);
    }
    return;
  }
  finish(self, tag.step, StepResult{{}, ErrorCode(code), std::move(message), std::move(device)});
  for (auto& part : self->state.plan->parts)
    for (auto& a : part->actors)
      if (a) caf::anon_send(a, abort_atom::value, tag.step);
}

}  // namespace

StepActor::behavior_type step_actor(StepSelf self, std::shared_ptr<const StepPlan> plan) {
  self->state.plan = std::move(plan);
  return {
      [self](run_atom, uint64_t step, std::vector<Tensor>& feeds) { return on_run(self, step, feeds); },
      [self](input_atom, const Tag& tag, uint32_t slot, Value& value) { on_input(self, tag, slot, value); },
      [self](abort_atom, const Tag& tag, int32_t code, std::string& message, std::string& device) {
        on_abort(self, tag, code, message, device);
      },
  };
}

}  // namespace troupe
