#include "actors/node_actor.hpp"

#include "actors/queue_actor.hpp"
#include "actors/timeouts.hpp"
#include "devices/cpu_threads.hpp"
#include "ops/state/variable.hpp"

namespace troupe {
namespace {

constexpr std::size_t kRememberedAborts = 1024;

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
  for (int s = 0; s < me_->num_inputs; ++s) {
    if (!me_->fixed_inputs[s].is_initialized()) message_slots_.push_back(s);
    else if (s < 64) fixed_mask_ |= uint64_t(1) << s;
  }
}

caf::behavior NodeActor::make_behavior() {
  if (me_->queue) {
    monitor(me_->queue);
    set_down_handler([this](caf::down_msg& down) { on_queue_down(down); });
  }
  return {
      [this](input_atom, const Tag& tag, uint32_t slot, Value& value) { on_input(tag, slot, value); },
      [this](abort_atom, uint64_t step) { on_abort(step); },
      [this](waits_atom) { return on_waits(); },
  };
}

void NodeActor::on_exit() {
  // The plan is released with the actor object (see ~Executable), never here.
  if (me_->queue) demonitor(me_->queue);  // the queue outlives executables; let it forget this actor
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
  Tensor* inputs = p.inputs();
  for (int s : message_slots_) inputs[s] = Tensor();
  p.used = false;
}

void NodeActor::on_input(const Tag& tag, uint32_t slot, Value& value) {
  if (!aborted_.empty() && aborted_.count(tag.step)) return;
  switch (me_->role) {
    case NodeRole::merge: on_merge_input(tag, slot, value); return;
    case NodeRole::loop_merge: on_loop_merge_input(tag, slot, value); return;
    case NodeRole::next_iteration: on_next_iteration_input(tag, slot, value); return;
    case NodeRole::enter_constant: on_invariant_input(tag, slot, value); return;
    case NodeRole::exit: on_exit_input(tag, slot, value); return;
    case NodeRole::stack_push:
      if (slot != kControlSlot) on_stack_push(tag, value);
      return;
    default: break;
  }
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

void NodeActor::on_merge_input(const Tag& tag, uint32_t slot, Value& value) {
  // Outputs: the first live data input, and its index. Every input of the tag is still
  // counted, so the slot is freed when the last (dead) one arrives.
  Pending& p = pending_for(tag);
  if (slot != kControlSlot && slot < 64) p.arrived |= uint64_t(1) << slot;
  if (slot != kControlSlot && !value.dead && !p.dead) {
    p.dead = true;  // here: "has fired"
    outputs_[0] = std::move(value.tensor);
    outputs_[1] = Tensor::scalar<int32_t>(int32_t(slot));
    emit(tag, outputs_.data(), false);
    for (auto& t : outputs_) t = Tensor();
  }
  if (--p.remaining > 0) return;
  if (!p.dead) emit(tag, nullptr, true);  // every data input was dead
  release(p);
}

std::size_t NodeActor::input_bytes(const Tensor* inputs) const {
  std::size_t bytes = 0;
  for (int i = 0; i < me_->num_inputs; ++i)
    if (inputs[i].is_initialized()) bytes += inputs[i].byte_size();
  return bytes;
}

void NodeActor::on_loop_merge_input(const Tag& tag, uint32_t slot, Value& value) {
  // Each tag of a loop's Merge has one input: the Enter's at iteration 0, the NextIteration's
  // after that. A dead one (a loop that is not run at all) passes on dead.
  if (slot == kControlSlot) return;
  if (value.dead) {
    emit(tag, nullptr, true);
    return;
  }
  outputs_[0] = std::move(value.tensor);
  outputs_[1] = Tensor::scalar<int32_t>(int32_t(slot));
  emit(tag, outputs_.data(), false);
  for (auto& t : outputs_) t = Tensor();
}

void NodeActor::FinishedIterations::finish(int64_t iteration) {
  if (iteration != below) {
    above.push_back(iteration);
    return;
  }
  ++below;
  std::sort(above.begin(), above.end());
  std::size_t used = 0;
  while (used < above.size() && above[used] == below) ++below, ++used;
  above.erase(above.begin(), above.begin() + std::ptrdiff_t(used));
}

void NodeActor::on_next_iteration_input(const Tag& tag, uint32_t slot, Value& value) {
  // Data: the value for the next iteration. Control: the frame's gate says iteration
  // tag.iteration has finished. Iteration k may start once every iteration up to
  // k - parallel_iterations has finished.
  if (me_->num_controls == 0) {
    // No gate: the value's arrival is the iteration's end (while_loop leaves the gate out
    // when the producer of this value is the body's only sink), so the next one may start.
    if (!value.dead) {
      Tag next = tag;
      ++next.iteration;
      emit(next, &value.tensor, false);
    }
    return;
  }
  auto key = FrameKey{tag.step, tag.frame};
  IterationGate& g = roles().gates[key];
  const int64_t window = me_->parallel_iterations;
  if (slot == kControlSlot) {
    g.done.finish(tag.iteration);
    for (std::size_t i = 0; i < g.held.size();) {
      if (g.held[i].first.iteration < g.done.below + window) {
        auto [next, tensor] = std::move(g.held[i]);
        g.held.erase(g.held.begin() + std::ptrdiff_t(i));
        emit(next, &tensor, false);
      } else {
        ++i;
      }
    }
  } else if (value.dead) {
    g.last = tag.iteration;  // the loop is over: nothing goes on to a next iteration
  } else {
    Tag next = tag;
    ++next.iteration;
    if (next.iteration < g.done.below + window) emit(next, &value.tensor, false);
    else g.held.emplace_back(std::move(next), std::move(value.tensor));
  }
  if (g.last >= 0 && g.done.below > g.last) roles().gates.erase(key);
}

void NodeActor::on_exit_input(const Tag& tag, uint32_t slot, Value& value) {
  // Slot 1, the LoopCond, arrives every iteration: true, the loop goes on; dead, the whole loop
  // is dead and exits dead; false, this is the last iteration, whose value (slot 0, sent only
  // when live) leaves the frame, with the number of iterations that ran. Those of the last
  // iteration may come in either order. With a control input (the loop's iteration gate, where
  // a gradient saves values of each iteration) the Exit also waits until every iteration has
  // finished.
  if (slot == 1 && !value.dead && value.tensor.scalar_value<bool>()) return;
  const bool gated = me_->num_controls > 0;
  if (slot == kControlSlot && !gated) return;
  auto [it, fresh] = roles().exits.try_emplace(FrameKey{tag.step, tag.frame});
  ExitState& e = it->second;
  if (slot == 0) {
    e.value = std::move(value.tensor);
  } else if (slot == 1) {
    e.last = tag.iteration;
    e.dead = value.dead;
  } else {
    e.done.finish(tag.iteration);
  }
  if (e.last < 0 || (!e.dead && !e.value.is_initialized()) || (gated && e.done.below <= e.last)) return;
  ExitState left = std::move(e);
  roles().exits.erase(it);
  const std::optional<Tag> parent = plan_->frames.parent(tag);
  if (!parent) return;  // a failed step's frame: nothing leaves it
  plan_->frames.exited(tag);
  if (left.dead) {
    emit(*parent, nullptr, true);
    return;
  }
  std::array<Tensor, 2> out{std::move(left.value), Tensor::scalar<int32_t>(int32_t(left.last))};
  emit(*parent, out.data(), false);
}

void NodeActor::on_stack_push(const Tag& tag, Value& value) {
  auto path = plan_->frames.iterations(tag);
  if (!path) return;  // the step has ended
  plan_->stacks.push(tag.step, me_->stack_hash, std::move(*path), std::move(value));
  emit(tag, nullptr, false);  // control outputs: the iteration gate
}

void NodeActor::serve(Invariant& inv, const Tag& tag) {
  emit(tag, &inv.value, inv.dead);
  ++inv.served;
}

void NodeActor::forget_if_over(std::map<FrameKey, Invariant>::iterator it) {
  const Invariant& inv = it->second;
  if (inv.arrived && inv.end >= 0 && inv.served > inv.end) roles().invariants.erase(it);
}

void NodeActor::on_invariant_input(const Tag& tag, uint32_t slot, Value& value) {
  // Slot 0: the value, in the parent frame. Control: iteration tag.iteration of the frame has
  // started (from the loop's first Merge). Slot 1: the loop's LoopCond; false or dead marks
  // the frame's last iteration. The value is kept until every iteration has had it.
  if (slot == 0) {
    auto it = roles().invariants.try_emplace({tag.step, child_frame_id(tag, me_->frame_hash)}).first;
    Invariant& inv = it->second;
    inv.arrived = true;
    inv.dead = value.dead;
    inv.value = std::move(value.tensor);
    for (auto& t : inv.waiting) serve(inv, t);
    inv.waiting.clear();
    forget_if_over(it);
    return;
  }
  auto it = roles().invariants.try_emplace({tag.step, tag.frame}).first;
  Invariant& inv = it->second;
  if (slot == kControlSlot) {
    if (inv.arrived) serve(inv, tag);
    else inv.waiting.push_back(tag);
  } else if (value.dead || !value.tensor.scalar_value<bool>()) {
    inv.end = tag.iteration;
  }
  forget_if_over(it);
}

bool NodeActor::fire_frame_op(const Tag& tag, Tensor* inputs, bool dead) {
  switch (me_->role) {
    case NodeRole::send:
    case NodeRole::recv: emit(tag, inputs, dead); return true;
    case NodeRole::enter: {
      emit(plan_->frames.enter(tag, get_attr<std::string>(me_->node->attrs, "frame_name", me_->node->name),
                               me_->frame_hash, me_->frame_exits, me_->frame_enters),
           inputs, dead);
      return true;
    }
    case NodeRole::stack_pop: {
      // Inputs: the iteration counts of the forward loops being differentiated, innermost
      // first (this loop's, then those of the loops around it). Iteration j of each gradient
      // loop stands for iteration n - 1 - j of its forward loop; frames above those keep their
      // iterations. The last, dead, iteration of a gradient loop (j = n) takes nothing.
      if (dead) {
        emit(tag, nullptr, true);
        return true;
      }
      try {
        // Level 0 is this loop: its iteration is the tag's, so its last, dead, iteration is
        // known (and takes nothing) without looking the frames up.
        auto forward = [&](int level, int64_t j) { return int64_t(inputs[level].scalar_value<int32_t>()) - 1 - j; };
        if (forward(0, tag.iteration) < 0) {
          emit(tag, nullptr, true);
          return true;
        }
        auto found = plan_->frames.iterations(tag);
        if (!found) return true;  // the step has failed
        StackStore::Path path = std::move(*found);
        if (int(path.size()) < me_->num_inputs)
          fail(ErrorCode::internal, "a StackPop outside the gradient loops it takes counts of");
        for (int level = 0; level < me_->num_inputs; ++level) {
          int64_t& j = path[path.size() - 1 - std::size_t(level)];
          j = forward(level, j);
          if (j < 0) {
            emit(tag, nullptr, true);
            return true;
          }
        }
        Value v = plan_->stacks.pop(tag.step, me_->stack_hash, path);
        emit(tag, &v.tensor, v.dead);
      } catch (const Error& e) {
        report_error(tag, e.code(), e.what());
      }
      return true;
    }
    default: return false;
  }
}

void NodeActor::fire(const Tag& tag, Tensor* inputs, bool dead) {
  if (me_->role != NodeRole::kernel && fire_frame_op(tag, inputs, dead)) return;
  if (dead) {
    emit(tag, nullptr, true);
    return;
  }
  if (me_->role == NodeRole::queue) {
    fire_queue_op(tag, inputs);
    return;
  }
  if (!kernel_) {
    try {
      fire_variable_op(tag, inputs);
    } catch (const Error& e) {
      report_error(tag, e.code(), e.what());
    }
    return;
  }
  uint64_t dead_outputs = 0;
  try {
    KernelContext ctx(*me_->node, *me_->device, inputs, me_->num_inputs, outputs_.data(),
                      int(outputs_.size()), &dead_outputs);
    if (me_->device->type() != DeviceType::cpu) {
      kernel_->compute(ctx);
    } else if (kernel_->runs_team()) {
      run_as_team([&] { kernel_->compute(ctx); });
    } else {
      auto lease = lease_one_core_for(input_bytes(inputs));
      kernel_->compute(ctx);
    }
    for (std::size_t p = 0; p < outputs_.size(); ++p)
      if (!outputs_[p].is_initialized() && !(p < 64 && (dead_outputs >> p) & 1))
        fail(ErrorCode::internal, "kernel produced no value for output {}", p);
  } catch (const Error& e) {
    report_error(tag, e.code(), e.what());
    return;
  } catch (const std::exception& e) {
    report_error(tag, ErrorCode::internal, e.what());
    return;
  }
  // Let go of the inputs before the outputs travel on: a node that runs after this one (an
  // optimizer update gated on the readers of its variable) then finds no reader holding them.
  for (int s : message_slots_) inputs[s] = Tensor();
  emit(tag, outputs_.data(), false, dead_outputs);
  for (auto& t : outputs_) t = Tensor();
}

void NodeActor::fire_variable_op(const Tag& tag, Tensor* inputs) {
  const Node& node = *me_->node;
  const std::string& name = variable_name(node);
  auto on_reply = [this, tag](ShardReply& reply) {
    if (reply.code != ErrorCode::ok) {
      report_error(tag, reply.code, reply.message);
      return;
    }
    if (!aborted_.empty() && aborted_.count(tag.step)) return;
    emit(tag, &reply.value, false);
  };
  // The shard is gone (CAF bounces the request) or never answered within its bound.
  auto on_error = [this, tag, &name](const char* what) {
    return [this, tag, what, name](caf::error& e) {
      report_error(tag, ErrorCode::unavailable,
                   fmt::format("the parameter shard did not answer the {} of variable '{}': {}", what, name,
                               to_string(e)));
    };
  };
  if (node.op == "ApplyGradient") {
    const Tensor& lr = inputs[1];
    double rate = lr.dtype() == DType::float64 ? lr.scalar_value<double>() : double(lr.scalar_value<float>());
    request(me_->shard, timeouts::shard_request(), apply_atom::value, name, optimizer_spec_of(node), inputs[0], rate)
        .then(on_reply, on_error("optimizer step"));
    return;
  }
  if (node.op == "VariableV2") {
    request(me_->shard, timeouts::shard_request(), read_atom::value, name).then(on_reply, on_error("read"));
  } else {
    bool validate = get_attr_or<bool>(node.attrs, "validate_shape", true);
    const auto& declared = get_attr<PartialShape>(node.attrs, "shape", node.name);
    if (validate && !declared.compatible_with(inputs[0].shape())) {
      report_error(tag, ErrorCode::invalid_argument,
                   fmt::format("value {} does not fit variable '{}' of shape {}",
                               inputs[0].describe(), name, declared.to_string()));
      return;
    }
    request(me_->shard, timeouts::shard_request(), update_atom::value, name, int32_t(variable_update_of(node.op)),
            inputs[0], get_attr_or<bool>(node.attrs, "validate_shape", true))
        .then(on_reply, on_error("update"));
  }
}

void NodeActor::fire_queue_op(const Tag& tag, Tensor* inputs) {
  // The queue answers when it can (a dequeue waits there for elements); meanwhile this actor
  // handles other tags. The reply of an aborted step is dropped.
  auto on_reply = [this, tag](QueueReply& reply) {
    if (!aborted_.empty() && aborted_.count(tag.step)) return;
    if (reply.code != ErrorCode::ok) {
      report_error(tag, reply.code, reply.message);
      return;
    }
    if (reply.values.size() != outputs_.size()) {
      report_error(tag, ErrorCode::internal,
                   fmt::format("the queue answered {} value(s) for {} output(s)", reply.values.size(), outputs_.size()));
      return;
    }
    emit(tag, reply.values.data(), false);
  };
  const Node& node = *me_->node;
  // The queue is gone (CAF bounces the request); a request it holds waits for the step's
  // deadline instead (actors/timeouts.hpp).
  auto on_error = [this, tag, queue = get_attr_or<std::string>(node.attrs, "shared_name", "?"),
                   what = node.op](caf::error& e) {
    report_error(tag, ErrorCode::unavailable,
                 fmt::format("queue '{}' did not answer its {} request: {}", queue, what, to_string(e)));
  };
  ++roles().queue_requests[tag.step];
  auto done = [this, step = tag.step] {
    auto it = roles().queue_requests.find(step);
    if (it != roles().queue_requests.end() && --it->second == 0) roles().queue_requests.erase(it);
  };
  auto ask = [&](auto&&... message) {
    request(me_->queue, timeouts::queue_request(), std::forward<decltype(message)>(message)...)
        .then([on_reply, done](QueueReply& r) mutable { done(), on_reply(r); },
              [on_error, done](caf::error& e) mutable { done(), on_error(e); });
  };
  if (node.op == "QueueEnqueue" || node.op == "QueueEnqueueMany") {
    std::vector<Tensor> components(inputs, inputs + me_->num_inputs);
    ask(enqueue_atom::value, tag.step, std::move(components), node.op == "QueueEnqueueMany");
  } else if (node.op == "QueueDequeue") {
    ask(dequeue_atom::value, tag.step, int64_t(-1), false);
  } else if (node.op == "QueueDequeueMany") {
    const Tensor& n = inputs[0];
    if (n.num_elements() != 1 || n.dtype() != DType::int32 || n.scalar_value<int32_t>() < 0) {
      done();
      report_error(tag, ErrorCode::invalid_argument, "n must be a non-negative int32 scalar, got " + n.describe());
      return;
    }
    ask(dequeue_atom::value, tag.step, int64_t(n.scalar_value<int32_t>()),
        get_attr_or<bool>(node.attrs, "allow_smaller_final_batch", false));
  } else if (node.op == "QueueClose") {
    ask(close_atom::value, get_attr_or<bool>(node.attrs, "cancel_pending_enqueues", false), QueueReply{});
  } else {
    ask(size_atom::value);
  }
}

void NodeActor::emit(const Tag& tag, Tensor* outputs, bool dead, uint64_t dead_outputs) {
  for (std::size_t port = 0; port < me_->outputs.size(); ++port) {
    bool port_dead = dead || (port < 64 && (dead_outputs >> port) & 1);
    for (const Target& t : me_->outputs[port]) {
      if (port_dead && t.drop_dead) continue;
      send_input(context(), t.actor, tag, t.slot, Value{port_dead ? Tensor() : outputs[port], port_dead});
    }
  }
  for (const Target& t : me_->control_outputs)
    send_input(context(), t.actor, tag, kControlSlot, Value{Tensor(), dead});
}

void NodeActor::report_error(const Tag& tag, ErrorCode code, const std::string& cause) {
  // Only remember the abort here: the caller may be firing from a pending entry. The step
  // actor's abort broadcast, which reaches this actor too, clears the entries.
  remember_abort(tag.step);
  std::string frame = plan_->frames.describe(tag);
  caf::anon_send(plan_->step_actor, abort_atom::value, tag, int32_t(code),
                 me_->where + (frame.empty() ? "" : " " + frame) + ": " + cause);
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
  if (!roles_) return;
  if (roles_->queue_requests.count(step)) {  // a queue still holds this step's request: withdraw it
    roles_->queue_requests.erase(step);
    caf::anon_send(me_->queue, cancel_atom::value, step);
  }
  auto drop = [step](auto& per_frame) {
    per_frame.erase(per_frame.lower_bound({step, 0}), per_frame.upper_bound({step, UINT64_MAX}));
  };
  drop(roles_->gates);
  drop(roles_->invariants);
  drop(roles_->exits);
}

void NodeActor::on_queue_down(const caf::down_msg& down) {
  if (!roles_ || down.source != me_->queue.address()) return;
  auto held = std::move(roles_->queue_requests);
  roles_->queue_requests.clear();
  for (auto& [step, count] : held)
    report_error(Tag{step, 0, 0}, ErrorCode::unavailable,
                 fmt::format("queue '{}' is gone ({}) and will not answer the {} request(s) it held",
                             get_attr_or<std::string>(me_->node->attrs, "shared_name", "?"), to_string(down.reason),
                             count));
}

std::vector<WaitReport> NodeActor::on_waits() const {
  std::vector<WaitReport> out;
  auto report = [&](const Pending& p) {
    if (!p.used) return;
    WaitReport r{me_->node->name, p.tag, expected_ - p.remaining, expected_, {}};
    for (int s = 0; s < me_->num_inputs; ++s) {
      bool arrived = s < 64 ? (p.arrived >> s) & 1 : p.inputs()[s].is_initialized();
      if (!arrived) r.missing.push_back(me_->input_names[s]);
    }
    int controls_missing = p.remaining - int(r.missing.size());
    if (controls_missing > 0) r.missing.push_back(std::to_string(controls_missing) + " control input(s)");
    out.push_back(std::move(r));
  };
  report(first_);
  for (auto& p : more_) report(*p);
  // Loop state still held: what a NextIteration or a loop invariant waits for.
  if (!roles_) return out;
  for (auto& [key, g] : roles_->gates) {
    WaitReport r{me_->node->name, Tag{key.first, key.second, g.done.below}, 0, 1, {}};
    r.missing.push_back(fmt::format("iteration {} of its frame to finish ({} value(s) held back, parallel_iterations {})",
                                    g.done.below, g.held.size(), me_->parallel_iterations));
    out.push_back(std::move(r));
  }
  for (auto& [step, count] : roles_->queue_requests) {
    WaitReport r{me_->node->name, Tag{step, 0, 0}, 0, 1, {}};
    r.missing.push_back(fmt::format("queue '{}' to answer ({} request(s): a dequeue waits for elements, an "
                                    "enqueue for room)",
                                    get_attr_or<std::string>(me_->node->attrs, "shared_name", "?"), count));
    out.push_back(std::move(r));
  }
  for (auto& [key, e] : roles_->exits) {
    WaitReport r{me_->node->name, Tag{key.first, key.second, 0}, 1, 2, {}};
    r.missing.push_back(e.last >= 0 ? "the last iteration's value" : "the loop's last LoopCond");
    out.push_back(std::move(r));
  }
  for (auto& [key, inv] : roles_->invariants) {
    WaitReport r{me_->node->name, Tag{key.first, key.second, inv.served}, 0, 1, {}};
    r.missing.push_back(inv.arrived ? fmt::format("the loop's last iteration ({} served so far)", inv.served)
                                    : "the loop invariant " + me_->input_names[0]);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace troupe
