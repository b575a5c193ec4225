// The node protocol (node.hpp): a node's inputs per tag, firing, aborts, errors and wait
// reports. How values are sent and how a node on the fast path is scheduled is fast_path.cpp's
// (its constants and jobs: fast_path.hpp).
#include "actors/executor/node.hpp"

#include <algorithm>

namespace troupe {
namespace {

constexpr std::size_t kRememberedAborts = 1024;

}  // namespace

NodeActor::NodeActor(caf::actor_config& config, std::shared_ptr<const ExecPlan> plan, int index,
                     std::unique_ptr<OpKernel> kernel, int replica)
    : CleanupHookActor(config),
      plan_(std::move(plan)),
      me_(&plan_->nodes[index]),
      kernel_(std::move(kernel)),
      expected_(me_->num_inputs - me_->num_fixed + me_->num_controls),
      replica_(replica),
      outputs_(me_->outputs.size()) {
  if (expected_ == 1) scratch_ = me_->preset_inputs();  // only on_input's one-message firing reads it
  set_up_fast_path();
  for (int s = 0; s < me_->num_inputs; ++s) {
    if (!me_->is_fixed(s)) {
      if (s < 64) message_mask_ |= uint64_t(1) << s;
      else message_slots_beyond_.push_back(s);
    } else if (s < 64) {
      fixed_mask_ |= uint64_t(1) << s;
    }
  }
}

caf::behavior NodeActor::make_behavior() {
  // A fast node stopped by its executable's end (~Executable) and never run by CAF before: its
  // first CAF message is the exit its stopping turn sent (which orders this read after the
  // stop). No behavior: the actor ends as it starts, without building one it would never use
  // and without handling the exit.
  if (stopped_.load(std::memory_order_relaxed)) return {};
  if (fast_) {
    // Everything goes through the fast path's mailbox (see node.hpp).
    auto reply_in_turn = [this](std::optional<uint64_t> step) {
      auto promise = make_response_promise<std::vector<WaitReport>>();
      post_call(context(), [this, promise, step](bool stopped) mutable {
        promise.deliver(stopped ? std::vector<WaitReport>{} : step ? step_waits(*step) : on_waits());
      });
      return promise;
    };
    return {
        [this](input_atom, const Tag& tag, uint32_t slot, Value& value) {
          post(context(), tag, slot, std::move(value));
        },
        [this](abort_atom, uint64_t step) { post_abort(context(), step); },
        [reply_in_turn](waits_atom) -> caf::result<std::vector<WaitReport>> { return reply_in_turn(std::nullopt); },
        [reply_in_turn](waits_atom, uint64_t step) -> caf::result<std::vector<WaitReport>> {
          return reply_in_turn(step);
        },
    };
  }
  return {
      [this](input_atom, const Tag& tag, uint32_t slot, Value& value) {
        if (!is_aborted(tag.step)) on_input(tag, slot, value);
      },
      [this](abort_atom, uint64_t step) { on_abort(step); },
      [this](waits_atom) { return on_waits(); },
      [this](waits_atom, uint64_t step) { return step_waits(step); },
      [this](wait_note_atom, uint64_t step, std::string& text) { on_wait_note(step, std::move(text)); },
  };
}

std::vector<WaitReport> NodeActor::step_waits(uint64_t step) const {
  std::vector<WaitReport> out;
  for (auto& r : on_waits())
    if (r.tag.step == step) out.push_back(std::move(r));
  add_step_waits(step, out);
  return out;
}

void NodeActor::start(Pending& p, const Tag& tag) {
  if (!p.primed) {  // a fresh slot: put the hoisted constants in for good
    if (me_->num_inputs > kInline) p.big = me_->preset_inputs();
    else
      for (int s = 0; s < int(me_->fixed_inputs.size()); ++s) p.small[s] = me_->fixed_inputs[s];
    p.primed = true;
  }
  p.used = true;
  p.tag = tag;
  p.remaining = expected_;
  p.dead = false;
  p.arrived = fixed_mask_;
}

NodeActor::Pending& NodeActor::pending_for(const Tag& tag) {
  if (first_.used && first_.tag == tag) return first_;
  Pending* free_slot = first_.used ? nullptr : &first_;
  for (auto& p : more_) {
    if (p->used && p->tag == tag) return *p;
    if (!p->used && !free_slot) free_slot = p.get();
  }
  if (!free_slot) {
    more_.push_back(std::make_unique<Pending>());
    free_slot = more_.back().get();
  }
  start(*free_slot, tag);
  return *free_slot;
}

void NodeActor::release(Pending& p) {
  let_go_of_inputs(p.inputs());
  p.used = false;
}

void NodeActor::on_input(const Tag& tag, uint32_t slot, Value& value) {
  if (expected_ == 1) {  // one input or one start signal: fire at once, keep nothing
    if (slot == kControlSlot) {
      fire(tag, scratch_.data(), value.dead);
    } else {
      scratch_[slot] = std::move(value.tensor);
      fire(tag, scratch_.data(), value.dead);
      scratch_[slot].reset();
    }
    return;
  }
  Pending& p = pending_for(tag);
  if (slot != kControlSlot) {
    p.inputs()[slot] = std::move(value.tensor);
    if (slot < 64) p.arrived |= uint64_t(1) << slot;
  }
  p.dead = p.dead || value.dead;
  if (--p.remaining > 0) return;
  // fire() neither adds nor removes slots, so p stays valid.
  fire(tag, p.inputs(), p.dead);
  release(p);
}

void NodeActor::report_error(const Tag& tag, ErrorCode code, const std::string& cause) {
  // Only remember the abort here: the caller may be firing from a pending entry. The step
  // actor's abort broadcast, which reaches this actor too, clears the entries.
  remember_abort(tag.step);
  std::string frame = plan_->frames.describe(tag);
  if (frame.empty() && tag.frame != 0) {
    // The partition's frame state has forgotten the frame already (its control loop, which
    // follows only the condition, may have exited while this iteration was still running
    // here): the node's own frame and the tag's iteration still say where it was.
    const Node& n = me_->kind == NodeKind::exit ? plan_->graph->node(me_->node->inputs[0].node) : *me_->node;
    frame = fmt::format("in frame '{}' iteration {}", loop_frame(n), tag.iteration);
  }
  caf::anon_send(plan_->step_actor, abort_atom::value, tag, int32_t(code),
                 me_->where() + (frame.empty() ? "" : " " + frame) + ": " + cause, *me_->device_name);
}

void NodeActor::report_unknown_frame(const Tag& tag, const std::string& loop) {
  if (plan_->frames.dropped(tag.step)) return;
  report_error(tag, ErrorCode::internal,
               fmt::format("while loop '{}' (frame {:#x}, iteration {}) was never entered on this device, so its "
                           "frame state here does not know it",
                           loop, tag.frame, tag.iteration));
}

void NodeActor::remember_abort(uint64_t step) {
  if (!aborted_.insert(step).second) return;
  // A ring of the last kRememberedAborts steps, oldest at aborted_next_ once full (a deque
  // would allocate half a KiB per node up front, and most nodes never see an abort).
  if (aborted_order_.size() < kRememberedAborts) {
    aborted_order_.push_back(step);
    return;
  }
  aborted_.erase(aborted_order_[aborted_next_]);
  aborted_order_[aborted_next_] = step;
  aborted_next_ = (aborted_next_ + 1) % kRememberedAborts;
}

void NodeActor::on_abort(uint64_t step) {
  remember_abort(step);
  if (first_.used && first_.tag.step == step) release(first_);
  for (auto& p : more_)
    if (p->used && p->tag.step == step) release(*p);
  drop_step(step);
}

std::vector<WaitReport> NodeActor::on_waits() const {
  std::vector<WaitReport> out;
  auto report = [&](const Pending& p) {
    if (!p.used) return;
    WaitReport r{me_->node->name, p.tag, expected_ - p.remaining, expected_, {}};
    for (int s = 0; s < me_->num_inputs; ++s) {
      bool arrived = s < 64 ? (p.arrived >> s) & 1 : p.inputs()[s].is_initialized();
      if (arrived) continue;
      r.missing.push_back(me_->input_name(s));
      if (WaitSource source = me_->input_source(s); !source.node.empty()) r.sources.push_back(std::move(source));
    }
    int controls_missing = p.remaining - int(r.missing.size());
    if (controls_missing > 0) r.missing.push_back(std::to_string(controls_missing) + " control input(s)");
    out.push_back(std::move(r));
  };
  report(first_);
  for (auto& p : more_) report(*p);
  add_waits(out);
  return out;
}

trace::Event NodeActor::trace_event(const Tag& tag, int64_t start, int64_t end) const {
  trace::Event e;
  e.key = plan_->trace_key;
  e.step = tag.step;
  e.frame = tag.frame;
  e.iteration = tag.iteration;
  e.ts = start;
  e.dur = end - start;
  return e;
}

}  // namespace troupe
