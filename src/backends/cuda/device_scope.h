// Makes an executable's GPU current for one call and puts the caller's back
// after: every CUDA call of an executable runs on its device
// (CompileOptions::device_index), whichever thread makes it.
#pragma once
#include <cuda_runtime.h>

#include "backends/cuda/cuda_check.h"

namespace rlx::cuda {

class DeviceScope {
 public:
  explicit DeviceScope(int device) {
    check(cudaGetDevice(&previous_), "cudaGetDevice");
    if (previous_ != device) check(cudaSetDevice(device), "cudaSetDevice(" + std::to_string(device) + ")");
    device_ = device;
  }
  ~DeviceScope() {
    if (previous_ != device_) cudaSetDevice(previous_);
  }
  DeviceScope(const DeviceScope&) = delete;
  DeviceScope& operator=(const DeviceScope&) = delete;

 private:
  int previous_ = 0, device_ = 0;
};

}  // namespace rlx::cuda
