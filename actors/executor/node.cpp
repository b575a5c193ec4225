#include "actors/executor/node.hpp"

namespace troupe {
namespace {

constexpr std::size_t kRememberedAborts = 1024;

// The fast path's state of this thread: whether it is running fast nodes (a Runner's turn), the
// execution unit it runs them on, and the node the current node's turn made ready, to run on
// this thread next (direct hand-off).
thread_local bool tls_running [[gnu::tls_model("initial-exec")]] = false;
thread_local caf::execution_unit* tls_unit [[gnu::tls_model("initial-exec")]] = nullptr;
thread_local NodeActor* tls_next [[gnu::tls_model("initial-exec")]] = nullptr;

}  // namespace

NodeActor::NodeActor(caf::actor_config& config, std::shared_ptr<const ExecPlan> plan, int index,
                     std::unique_ptr<OpKernel> kernel)
    : caf::event_based_actor(config),
      plan_(std::move(plan)),
      me_(&plan_->nodes[index]),
      kernel_(std::move(kernel)),
      expected_(me_->num_inputs - me_->num_fixed + me_->num_controls),
      scratch_(me_->fixed_inputs),
      outputs_(me_->outputs.size()) {
  fast_ = me_->kind != NodeKind::variable && me_->kind != NodeKind::queue;
  for (int s = 0; s < me_->num_inputs; ++s) {
    if (!me_->fixed_inputs[s].is_initialized()) message_slots_.push_back(s);
    else if (s < 64) fixed_mask_ |= uint64_t(1) << s;
  }
}

caf::behavior NodeActor::make_behavior() {
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
  };
}

std::vector<WaitReport> NodeActor::step_waits(uint64_t step) const {
  std::vector<WaitReport> out;
  for (auto& r : on_waits())
    if (r.tag.step == step) out.push_back(std::move(r));
  add_step_waits(step, out);
  return out;
}

// ---- the fast path ----------------------------------------------------------------------

void NodeActor::post(caf::execution_unit* unit, const Tag& tag, uint32_t slot, Value&& value) {
  if (mailbox_.put(NodeMailbox::Item{NodeMailbox::Item::Kind::input, slot, tag, std::move(value)})) schedule(unit);
}

void NodeActor::post_abort(caf::execution_unit* unit, uint64_t step) {
  if (mailbox_.put(NodeMailbox::Item{NodeMailbox::Item::Kind::abort, 0, Tag{step, 0, 0}, Value{}})) schedule(unit);
}

void NodeActor::post_call(caf::execution_unit* unit, NodeMailbox::Call&& call) {
  if (mailbox_.put(std::move(call))) schedule(unit);
}

void NodeActor::stop_fast_path(std::function<void()> done) {
  post_call(nullptr, [this, done = std::move(done)](bool) {
    stopped_ = true;
    done();
  });
}

caf::execution_unit* NodeActor::unit() { return fast_ ? tls_unit : context(); }

void NodeActor::schedule(caf::execution_unit* unit) {
  if (tls_running) {
    if (!tls_next) {
      caf::intrusive_ptr_add_ref(ctrl());  // the hand-off's, released after the node's turn
      tls_next = this;
      return;
    }
    unit = tls_unit;
  }
  enqueue_runner(unit);
}

void NodeActor::enqueue_runner(caf::execution_unit* unit) {
  caf::intrusive_ptr_add_ref(ctrl());  // the job's, released by the worker after its turn
  if (unit) unit->exec_later(&runner_);
  else home_system().scheduler().enqueue(&runner_);
}

bool NodeActor::drain() {
  for (int round = 0; round < 4; ++round) {
    if (!mailbox_.take(taken_, taken_calls_)) return false;
    for (auto& call : taken_calls_) {
      try {
        call(stopped_);
      } catch (const std::exception& e) {
        std::fprintf(stderr, "troupe: %s: %s\n", me_->where.c_str(), e.what());
      }
    }
    taken_calls_.clear();
    if (!stopped_)
      for (auto& item : taken_) {
        // A node handed off to runs after this node's turn; with more of the turn to come, it
        // goes to the scheduler instead, where another thread may take it meanwhile.
        if (tls_next) flush_hand_off();
        handle(item);
      }
    taken_.clear();
  }
  return true;
}

void NodeActor::flush_hand_off() {
  NodeActor* next = tls_next;
  tls_next = nullptr;
  next->enqueue_runner(tls_unit);
  caf::intrusive_ptr_release(next->ctrl());
}

void NodeActor::handle(NodeMailbox::Item& item) {
  try {
    if (item.kind == NodeMailbox::Item::Kind::abort) on_abort(item.tag.step);
    else if (!is_aborted(item.tag.step)) on_input(item.tag, item.slot, item.value);
  } catch (const Error& e) {
    report_error(item.tag, e.code(), e.what());
  } catch (const std::exception& e) {
    report_error(item.tag, ErrorCode::internal, e.what());
  }
}

caf::resumable::resume_result NodeActor::Runner::resume(caf::execution_unit* unit, std::size_t) {
  tls_running = true;
  tls_unit = unit;
  resume_result result = awaiting_message;
  NodeActor* node = node_;
  for (int handed = 0;; ++handed) {
    const bool more = node->drain();
    if (node == node_ && handed == 0) {
      if (more) result = resume_later;  // the worker queues this job again, with its reference
    } else {
      if (more) node->enqueue_runner(unit);
      caf::intrusive_ptr_release(node->ctrl());  // the hand-off's
    }
    node = tls_next;
    tls_next = nullptr;
    if (!node) break;
    if (handed + 1 >= kHandOffs) {
      tls_next = node;
      flush_hand_off();
      break;
    }
  }
  tls_running = false;
  tls_unit = nullptr;
  return result;
}

void NodeActor::Runner::intrusive_ptr_add_ref_impl() { caf::intrusive_ptr_add_ref(node_->ctrl()); }

void NodeActor::Runner::intrusive_ptr_release_impl() { caf::intrusive_ptr_release(node_->ctrl()); }

void NodeActor::on_exit() {
  // The plan is released with the actor object (see ~Executable), never here.
  release(first_);
  more_.clear();
  kernel_.reset();
}

void NodeActor::start(Pending& p, const Tag& tag) {
  if (!p.primed) {  // a fresh slot: put the hoisted constants in for good
    if (me_->num_inputs > kInline) p.big = me_->fixed_inputs;
    else
      for (int s = 0; s < me_->num_inputs; ++s) p.small[s] = me_->fixed_inputs[s];
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
      scratch_[slot] = Tensor();
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

void NodeActor::emit(const Tag& tag, Tensor* outputs, bool dead, uint64_t dead_outputs) {
  caf::execution_unit* const u = unit();
  for (std::size_t port = 0; port < me_->outputs.size(); ++port) {
    bool port_dead = dead || (port < 64 && (dead_outputs >> port) & 1);
    for (const Target& t : me_->outputs[port]) {
      if (port_dead && t.drop_dead) continue;
      deliver(u, t, tag, t.slot, Value{port_dead ? Tensor() : outputs[port], port_dead});
    }
  }
  for (const Target& t : me_->control_outputs) deliver(u, t, tag, kControlSlot, Value{Tensor(), dead});
}

void NodeActor::pass_input_on(const Tag& tag, Tensor* inputs, bool dead) {
  if (dead) {
    emit(tag, nullptr, true);
    return;
  }
  outputs_[0] = std::move(inputs[0]);
  emit(tag, outputs_.data(), false);
  outputs_[0] = Tensor();
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
                 me_->where + (frame.empty() ? "" : " " + frame) + ": " + cause);
}

void NodeActor::report_unknown_frame(const Tag& tag, const std::string& loop) {
  if (plan_->frames.dropped(tag.step)) return;
  report_error(tag, ErrorCode::internal,
               fmt::format("while loop '{}' (frame {:#x}, iteration {}) was never entered on this device, so its "
                           "frame state here does not know it",
                           loop, tag.frame, tag.iteration));
}

void NodeActor::remember_abort(uint64_t step) {
  if (aborted_.insert(step).second) {
    aborted_order_.push_back(step);
    if (aborted_order_.size() > kRememberedAborts) {
      aborted_.erase(aborted_order_.front());
      aborted_order_.pop_front();
    }
  }
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
      r.missing.push_back(me_->input_names[s]);
      if (!me_->input_sources[std::size_t(s)].node.empty()) r.sources.push_back(me_->input_sources[std::size_t(s)]);
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
