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
  kernels_[op].push_back({device, std::move(factory)});
}

const KernelFactory* KernelRegistry::find(const std::string& op, DeviceType device) const {
  auto it = kernels_.find(op);
  if (it == kernels_.end()) return nullptr;
  for (auto& [d, f] : it->second)
    if (d == device) return &f;
  return nullptr;
}

bool KernelRegistry::has(const std::string& op, DeviceType device) const { return find(op, device) != nullptr; }

std::unique_ptr<OpKernel> KernelRegistry::create(const Node& node, DeviceType device) const {
  if (const KernelFactory* f = find(node.op, device)) return (*f)(node);
  fail(ErrorCode::not_found, "{}: no {} kernel is registered for op '{}'", node.describe(),
       name_of(device), node.op);
}

}  // namespace troupe
