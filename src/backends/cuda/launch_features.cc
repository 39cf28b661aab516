// What launches may use (see launch.cuh), decided once for the current
// device: programmatic dependent launch and thread-block clusters, both from
// compute capability 9.0 on (PDL unless RLX_PDL=0); and the device's
// multiprocessors, which grids are sized against; and the L2 policy of
// constant weights (weight_loads.cuh).
#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "backends/cuda/launch.cuh"
#include "backends/trace.h"

namespace rlx::cuda {

namespace {

bool hopper_or_newer() {
  int device = 0, major = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
  return major >= 9;
}

}  // namespace

bool pdl_enabled() {
  static const bool enabled = [] {
    const char* e = std::getenv("RLX_PDL");
    if (e && std::strcmp(e, "0") == 0) return false;
    return hopper_or_newer();
  }();
  return enabled;
}

bool pdl_off_for(const char* label) {
  static const std::vector<std::string> parts = label_parts(std::getenv("RLX_PDL_OFF_FOR"));
  return label && label_has_part(label, parts);
}

bool clusters_available() {
  static const bool available = hopper_or_newer();
  return available;
}

namespace {
std::atomic<int64_t> g_evict_first{0};
}  // namespace

uint8_t evict_first_weights(bool constant) {
  const char* e = std::getenv("RLX_WEIGHTS_EVICT_FIRST");
  if (!constant || (e && std::strcmp(e, "0") == 0)) return 0;
  g_evict_first.fetch_add(1);
  return 1;
}

int64_t evict_first_launches() { return g_evict_first.load(); }

int multiprocessor_count() {
  int device = 0, n = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, device), "multiprocessor count");
  return n;
}

}  // namespace rlx::cuda
