// Whether launches allow programmatic dependent launch (see launch.cuh): on
// compute capability 9.0 and newer, unless RLX_PDL=0.
#include <cuda_runtime.h>

#include <cstdlib>
#include <cstring>

#include "backends/cuda/launch.cuh"

namespace rlx::cuda {

bool pdl_enabled() {
  static const bool enabled = [] {
    const char* e = std::getenv("RLX_PDL");
    if (e && std::strcmp(e, "0") == 0) return false;
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
    return major >= 9;
  }();
  return enabled;
}

}  // namespace rlx::cuda
