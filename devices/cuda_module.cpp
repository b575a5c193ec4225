#include "devices/cuda_module.hpp"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <mutex>

namespace troupe::cuda {
namespace {

struct Loaded {
  ModuleApi api{};
  bool ok = false;
  std::string why;
};

std::string this_library_dir() {
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&this_library_dir), &info) && info.dli_fname)
    return std::filesystem::path(info.dli_fname).parent_path().string();
  return ".";
}

template <class F>
bool bind(void* handle, const char* symbol, F& slot, std::string& why) {
  slot = reinterpret_cast<F>(dlsym(handle, symbol));
  if (!slot) why = std::string("CUDA module lacks symbol ") + symbol;
  return slot != nullptr;
}

Loaded load() {
  Loaded l;
  if (const char* off = std::getenv("TROUPE_DISABLE_CUDA"); off && std::string(off) == "1") {
    l.why = "CUDA disabled by TROUPE_DISABLE_CUDA=1";
    return l;
  }
  std::string path;
  if (const char* p = std::getenv("TROUPE_CUDA_MODULE")) {
    path = p;
  } else {
    path = this_library_dir() + "/libtroupe_cuda.so";
    if (!std::filesystem::exists(path)) {
      l.why = "CUDA module not built (no " + path + ")";
      return l;
    }
  }
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    l.why = std::string("cannot load CUDA module: ") + dlerror();
    return l;
  }
  auto& a = l.api;
  if (!bind(handle, "troupe_cuda_abi_version", a.abi_version, l.why) ||
      !bind(handle, "troupe_cuda_device_count", a.device_count, l.why) ||
      !bind(handle, "troupe_cuda_device_info", a.device_info, l.why) ||
      !bind(handle, "troupe_cuda_malloc", a.malloc, l.why) ||
      !bind(handle, "troupe_cuda_free", a.free, l.why) ||
      !bind(handle, "troupe_cuda_memcpy", a.memcpy, l.why))
    return l;
  if (a.abi_version() != kModuleAbi) {
    l.why = "CUDA module ABI " + std::to_string(a.abi_version()) + " does not match " +
            std::to_string(kModuleAbi);
    return l;
  }
  l.ok = true;
  return l;
}

}  // namespace

const ModuleApi* module(std::string* why) {
  static const Loaded loaded = load();
  if (why) *why = loaded.why;
  return loaded.ok ? &loaded.api : nullptr;
}

}  // namespace troupe::cuda
