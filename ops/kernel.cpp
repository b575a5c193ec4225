#include "ops/kernel.hpp"

namespace troupe {

KernelRegistry& KernelRegistry::global() {
  static KernelRegistry* registry = new KernelRegistry();
  return *registry;
}

void KernelRegistry::add(const std::string& op, DeviceType device, KernelFactory factory) {
  if (has(op, device))
    fail(ErrorCode::already_exists, "a {} kernel for op '{}' is registered twice",
         name_of(device), op);
  kernels_.push_back({{op, device}, std::move(factory)});
}

bool KernelRegistry::has(const std::string& op, DeviceType device) const {
  for (auto& [key, f] : kernels_)
    if (key.first == op && key.second == device) return true;
  return false;
}

std::unique_ptr<OpKernel> KernelRegistry::create(const Node& node, DeviceType device) const {
  for (auto& [key, f] : kernels_)
    if (key.first == node.op && key.second == device) return f(node);
  fail(ErrorCode::not_found, "{}: no {} kernel is registered for op '{}'", node.describe(),
       name_of(device), node.op);
}

}  // namespace troupe
