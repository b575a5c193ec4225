// Runs where a GPU is found (exit 77, "skipped", elsewhere): the CUDA module loads, names the
// devices, and device memory round-trips through the module's allocator.
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/error.hpp"
#include "core/tensor.hpp"
#include "devices/cuda_module.hpp"
#include "devices/device.hpp"

using namespace troupe;

int main() {
  auto& registry = DeviceRegistry::instance();
  if (registry.gpu_count() == 0) {
    std::printf("no GPU (%s): skipped\n", registry.gpu_status().c_str());
    return 77;
  }
  int failures = 0;
  auto check = [&](bool ok, const char* what) {
    std::printf("%s: %s\n", ok ? "ok" : "FAILED", what);
    failures += !ok;
  };
  const auto* api = cuda::module();
  check(api != nullptr, "the CUDA module is loaded");
  for (auto& d : registry.devices()) {
    if (d->type() != DeviceType::gpu) continue;
    std::printf("%s: %s\n", d->name().c_str(), d->description().c_str());
    check(!d->allocator().host_accessible(), "GPU memory is not host-accessible");
    std::vector<float> host(1 << 20);
    for (std::size_t i = 0; i < host.size(); ++i) host[i] = float(i) * 0.5f;
    auto before = d->allocator().bytes_in_use();
    {
      Tensor t(DType::float32, Shape{int64_t(host.size())}, d->allocator());
      check(d->allocator().bytes_in_use() == before + host.size() * 4, "allocation is counted");
      check(api->memcpy(d->index(), t.raw_data(), host.data(), host.size() * 4, 0) == 0, "copy to the GPU");
      std::vector<float> back(host.size(), -1.0f);
      check(api->memcpy(d->index(), back.data(), t.raw_data(), back.size() * 4, 1) == 0, "copy back");
      check(std::memcmp(back.data(), host.data(), host.size() * 4) == 0, "the bytes survive the round trip");
    }
    check(d->allocator().bytes_in_use() == before, "freeing is counted");
  }
  return failures ? 1 : 0;
}
