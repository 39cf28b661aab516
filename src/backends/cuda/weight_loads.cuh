// A matrix-vector product's weight loads with an L2 policy. Constant weights
// are read once a forward pass, so their lines go first out of L2 (evict
// first), and what is read again (x, the norm's gain, the KV cache, the
// next kernel's activations) stays. RLX_WEIGHTS_EVICT_FIRST=0 loads them
// with the normal policy (for measuring; read per launch).
#pragma once
#include <cstdint>

namespace rlx::cuda {

// The launch's choice: evict_first_weights (launch.cuh).

__device__ __forceinline__ uint64_t weight_load_policy(bool evict_first) {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (evict_first) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
  else asm volatile("createpolicy.fractional.L2::evict_normal.b64 %0, 1.0;" : "=l"(policy));
#endif
  return policy;
}

__device__ __forceinline__ uint4 load_weight(const uint4* p, uint64_t policy) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  uint4 v;
  asm volatile("ld.global.nc.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(p), "l"(policy));
  return v;
#else
  return __ldg(p);
#endif
}

}  // namespace rlx::cuda
