#include "actors/executor/kernel_node.hpp"

#include "devices/cpu_threads.hpp"

namespace troupe {

std::size_t KernelNode::input_bytes(const Tensor* inputs) const {
  std::size_t bytes = 0;
  for (int i = 0; i < me_->num_inputs; ++i)
    if (inputs[i].is_initialized()) bytes += inputs[i].byte_size();
  return bytes;
}

void KernelNode::fire(const Tag& tag, Tensor* inputs, bool dead) {
  if (dead) {
    emit(tag, nullptr, true);
    return;
  }
  uint64_t dead_outputs = 0;
  try {
    KernelContext ctx(*me_->node, *me_->device, inputs, me_->num_inputs, outputs_.data(), int(outputs_.size()),
                      &dead_outputs);
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
  let_go_of_inputs(inputs);
  emit(tag, outputs_.data(), false, dead_outputs);
  for (auto& t : outputs_) t = Tensor();
}

}  // namespace troupe
