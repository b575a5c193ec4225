// libtroupe_cuda.so: everything that links the CUDA libraries. Loaded by devices/cuda_module.cpp
// with dlopen; exports only the C functions below (see cuda::ModuleApi).
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>

namespace {

void set_error(char* out, int len, cudaError_t e) {
  if (out && len > 0) std::snprintf(out, std::size_t(len), "%s (%s)", cudaGetErrorString(e), cudaGetErrorName(e));
}

}  // namespace

extern "C" {

__attribute__((visibility("default"))) int troupe_cuda_abi_version() { return 1; }

// Any error (no driver, no device) reads as zero devices, with the reason in error.
__attribute__((visibility("default"))) int troupe_cuda_device_count(char* error, int error_len) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    set_error(error, error_len, e);
    cudaGetLastError();
    return 0;
  }
  return n;
}

__attribute__((visibility("default"))) int troupe_cuda_device_info(int device, char* name, int name_len,
                                                                   size_t* total_memory, int* cc_major,
                                                                   int* cc_minor) {
  cudaDeviceProp prop;
  cudaError_t e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) return int(e);
  std::snprintf(name, std::size_t(name_len), "%s", prop.name);
  *total_memory = prop.totalGlobalMem;
  *cc_major = prop.major;
  *cc_minor = prop.minor;
  return 0;
}

__attribute__((visibility("default"))) void* troupe_cuda_malloc(int device, size_t bytes, char* error,
                                                                int error_len) {
  void* p = nullptr;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaMalloc(&p, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    set_error(error, error_len, e);
    return nullptr;
  }
  return p;
}

__attribute__((visibility("default"))) void troupe_cuda_free(int device, void* ptr) {
  cudaSetDevice(device);
  cudaFree(ptr);
}

__attribute__((visibility("default"))) int troupe_cuda_memcpy(int device, void* dst, const void* src,
                                                              size_t bytes, int kind) {
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess)
    e = cudaMemcpy(dst, src, bytes, kind == 0 ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost);
  return int(e);
}

}  // extern "C"
