// A block's share of the next product's weights, asked of L2 by the bulk
// prefetch (sm_90): a hint with no result to wait for, issued by the one
// thread of the block the caller names (where its registers are free).
#pragma once
#include <cstdint>

#include "thunks/params.h"

namespace rlx::cuda {

__device__ __forceinline__ void prefetch_next_weights(const L2Prefetch& f, const uint8_t* arena, bool issuer) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (!issuer) return;
  const uint64_t all = blockIdx.x + uint64_t(gridDim.x) * (blockIdx.y + uint64_t(gridDim.y) * blockIdx.z);
  if (all < f.first_block) return;
  const uint64_t block = all - f.first_block;
#pragma unroll
  for (int r = 0; r < L2Prefetch::kRanges; ++r) {
    const uint64_t lo = block * f.per_block[r];
    if (lo >= f.bytes[r]) continue;
    const uint64_t len = f.bytes[r] - lo < f.per_block[r] ? f.bytes[r] - lo : f.per_block[r];
    asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(arena + f.offset[r] + lo), "r"(uint32_t(len))
                 : "memory");
  }
#endif
}

// The L2 policy of a product's own weight loads: evict first where they are
// read once a pass (L2Prefetch::stream_weights), so they do not push out
// the next product's prefetched weights; else normal.
__device__ __forceinline__ uint64_t weight_load_policy(const L2Prefetch& f) {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if (f.stream_weights) asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
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
