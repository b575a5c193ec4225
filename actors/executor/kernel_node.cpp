#include "actors/executor/kernel_node.hpp"

#include "core/allocator.hpp"
#include "core/trace.hpp"
#include "devices/cpu_threads.hpp"

namespace troupe {

std::size_t KernelNode::input_bytes(const Tensor* inputs) const {
  std::size_t bytes = 0;
  for (int i = 0; i < me_->num_inputs; ++i)
    if (inputs[i].is_initialized()) bytes += inputs[i].byte_size();
  return bytes;
}

void KernelNode::fire(const Tag& tag, Tensor* inputs, bool dead) {
  // Off, one relaxed load; the firing itself is then run() with no tracing in it at all (the
  // traced path is out of line: in line, it would slow every untraced firing).
  if (trace::on()) [[unlikely]] {
    fire_maybe_traced(tag, inputs, dead);
    return;
  }
  run(tag, inputs, dead, 0);
}

void KernelNode::fire_maybe_traced(const Tag& tag, Tensor* inputs, bool dead) {
  run(tag, inputs, dead, trace_start(tag));
}

inline void KernelNode::run(const Tag& tag, Tensor* inputs, bool dead, int64_t traced_since) {
  if (dead) {
    emit(tag, nullptr, true);
    return;
  }
  uint64_t dead_outputs = 0;
  const bool timed = timer_.next(cheap_);
  const int64_t began = timed ? trace::now() : 0;
  try {
    KernelContext ctx(*me_->node, *me_->device, inputs, me_->num_inputs, outputs_.data(), int(outputs_.size()),
                      &dead_outputs);
    ctx.allow_forwarding(message_mask());
    if (me_->device->type() != DeviceType::cpu) {
      kernel_->compute(ctx);
    } else if (kernel_->runs_team()) {
      run_as_team([&] { kernel_->compute(ctx); });
    } else {
      const std::size_t bytes = input_bytes(inputs);
      in_kib_ = bytes <= FreeBlocks::kWarmBytes ? uint16_t(bytes >> 10) : 0;
      auto lease = lease_one_core_for(bytes);
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
  if (timed) account(trace::now() - began);
  if (traced_since) trace_firing(tag, inputs, traced_since);
  // Let go of the inputs before the outputs travel on: a node that runs after this one (an
  // optimizer update gated on the readers of its variable) then finds no reader holding them.
  let_go_of_inputs(inputs);
  emit_owned(tag, outputs_.data(), dead_outputs);
}

void KernelNode::trace_firing(const Tag& tag, const Tensor* inputs, int64_t start) {
  const int64_t end = trace::now();
  const Device& device = *me_->device;
  if (!trace_op_) {
    trace_op_ = trace::intern(me_->node->op);
    trace_node_ = trace::intern(me_->node->name);
    const std::string short_name = device.name().substr(device.name().rfind("/device:") + 1);
    trace_row_ = device.type() == DeviceType::cpu ? 0 : trace::named_row(short_name);
    trace_memory_ = trace::intern("memory in use, " + short_name);
  }
  uint64_t hash = 0x9e3779b97f4a7c15ull;
  for (int i = 0; i < me_->num_inputs; ++i) {
    hash = (hash ^ uint64_t(inputs[i].is_initialized() ? inputs[i].shape().rank() + 1 : 0)) * 0x100000001b3ull;
    if (inputs[i].is_initialized())
      for (int64_t d : inputs[i].shape()) hash = (hash ^ uint64_t(d)) * 0x100000001b3ull;
  }
  if (!trace_shapes_ || hash != trace_shapes_hash_) {
    std::string text;
    for (int i = 0; i < me_->num_inputs; ++i) {
      if (i) text += ' ';
      text += inputs[i].is_initialized() ? inputs[i].shape().to_string() : "-";
    }
    trace_shapes_ = trace::intern(text);
    trace_shapes_hash_ = hash;
  }
  trace::Event e = trace_event(tag, start, end);
  e.name = trace_op_;
  e.cat = trace::Category::kernel;
  e.node = trace_node_;
  e.detail = trace_shapes_;
  e.row = trace_row_ ? trace_row_ : trace::thread_row();
  trace::record(e);
  // The device's memory in use, at most once per 20,000 of trace::now()'s ticks per thread (a
  // counter, not an event per kernel: small kernels would double the events).
  static thread_local int64_t counted_at [[gnu::tls_model("initial-exec")]] = 0;
  static thread_local const Device* counted_device [[gnu::tls_model("initial-exec")]] = nullptr;
  if (end - counted_at < 20'000 && counted_device == &device) return;
  counted_at = end;
  counted_device = &device;
  trace::Event m;
  m.phase = trace::Phase::counter;
  m.key = e.key;
  m.step = tag.step;
  m.ts = end;
  m.name = trace_memory_;
  m.cat = trace::Category::memory;
  m.value() = int64_t(device.allocator().bytes_in_use());
  trace::record(m);
}

}  // namespace troupe
