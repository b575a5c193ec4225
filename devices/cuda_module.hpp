#pragma once
// The CUDA module boundary. All CUDA code lives in libtroupe_cuda.so, loaded with dlopen at
// run time, so the same binaries run on machines without CUDA libraries. This header is the
// only way the rest of Troupe talks to it; every entry is a plain C function of the module.
#include <cstddef>
#include <string>

namespace troupe::cuda {

constexpr int kModuleAbi = 1;

// The module's C interface; see devices/cuda/module.cu.
struct ModuleApi {
  int (*abi_version)();
  int (*device_count)(char* error, int error_len);
  int (*device_info)(int device, char* name, int name_len, std::size_t* total_memory,
                     int* cc_major, int* cc_minor);
  void* (*malloc)(int device, std::size_t bytes, char* error, int error_len);
  void (*free)(int device, void* ptr);
  // kind: 0 host to device, 1 device to host. Synchronous; returns 0 or a CUDA error code.
  int (*memcpy)(int device, void* dst, const void* src, std::size_t bytes, int kind);
};

// Loads the module once (thread-safe). Returns nullptr when it is not available, with the
// reason in *why: not built, dlopen failed (missing CUDA libraries), ABI mismatch.
// TROUPE_CUDA_MODULE names another file; TROUPE_DISABLE_CUDA=1 skips loading.
const ModuleApi* module(std::string* why = nullptr);

}  // namespace troupe::cuda
