#include "devices/device.hpp"

#include <cstdlib>

#include <fmt/format.h>

#include <thread>

#include "core/error.hpp"
#include "devices/cuda_module.hpp"

namespace troupe {
namespace {

// Device memory through the CUDA module, behind a size-class cache: cudaMalloc and cudaFree
// synchronise the device, so a step must not call them once the first step has run.
CachingAllocator* cuda_allocator(const cuda::ModuleApi& api, int device, const std::string& name) {
  CachingAllocator::Backend backend{
      [&api, device](std::size_t bytes, std::string* why) -> void* {
        char error[256] = {0};
        void* p = api.malloc(device, bytes, error, sizeof error);
        if (!p) *why = error;
        return p;
      },
      [&api, device](void* ptr) { api.free(device, ptr); }};
  return new CachingAllocator(name, /*host_accessible=*/false, std::move(backend));
}

}  // namespace

const char* name_of(DeviceType type) { return type == DeviceType::cpu ? "CPU" : "GPU"; }

DeviceRegistry::DeviceRegistry() {
  auto& cpu_alloc = host_allocator();
  devices_.push_back(std::make_unique<Device>(
      cpu_alloc.device_name(), DeviceType::cpu, 0, cpu_alloc,
      fmt::format("host CPU, {} hardware threads", std::thread::hardware_concurrency())));
  // TROUPE_CPU_DEVICES=N: N host CPU devices (CPU:0 .. CPU:N-1), as TensorFlow's
  // device_count {'CPU': N}; they share the host's memory and cores, and ops placed on
  // different ones exchange values through Send/Recv pairs.
  if (const char* n = std::getenv("TROUPE_CPU_DEVICES")) {
    int count = std::atoi(n);
    if (count < 1 || count > 64)
      fail(ErrorCode::invalid_argument, "TROUPE_CPU_DEVICES must be 1 to 64, got '{}'", n);
    for (int i = 1; i < count; ++i)
      devices_.push_back(std::make_unique<Device>(full_device_name("localhost", 0, "CPU", i), DeviceType::cpu, i,
                                                  cpu_alloc,
                                                  fmt::format("host CPU, virtual device {} of {} (shares CPU:0's "
                                                              "memory and cores)", i, count)));
  }
  const cuda::ModuleApi* api = cuda::module(&gpu_status_);
  if (!api) return;
  char error[256] = {0};
  int n = api->device_count(error, sizeof error);
  if (n == 0) {
    gpu_status_ = error[0] ? std::string("no GPU: ") + error : "no GPU found";
    return;
  }
  gpu_status_ = fmt::format("{} GPU(s)", n);
  for (int i = 0; i < n; ++i) {
    char name[256] = {0};
    std::size_t memory = 0;
    int major = 0, minor = 0;
    api->device_info(i, name, sizeof name, &memory, &major, &minor);
    auto full = full_device_name("localhost", 0, "GPU", i);
    // Allocators live as long as the process: tensors may outlive any registry user.
    auto* alloc = cuda_allocator(*api, i, full);
    devices_.push_back(std::make_unique<Device>(
        full, DeviceType::gpu, i, *alloc,
        fmt::format("{}, compute capability {}.{}, {} MiB", name, major, minor, memory >> 20)));
  }
}

const DeviceRegistry& DeviceRegistry::instance() {
  static const DeviceRegistry* registry = new DeviceRegistry();
  return *registry;
}

const Device* DeviceRegistry::find(const std::string& full_name) const {
  for (auto& d : devices_)
    if (d->name() == full_name) return d.get();
  return nullptr;
}

std::vector<const Device*> DeviceRegistry::matching(const DeviceSpec& spec) const {
  std::vector<const Device*> out;
  for (auto& d : devices_)
    if (spec.matches(d->spec())) out.push_back(d.get());
  return out;
}

int DeviceRegistry::gpu_count() const {
  int n = 0;
  for (auto& d : devices_) n += d->type() == DeviceType::gpu;
  return n;
}

}  // namespace troupe
