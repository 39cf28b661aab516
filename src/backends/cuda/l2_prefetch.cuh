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
  const uint64_t block = blockIdx.x + uint64_t(gridDim.x) * (blockIdx.y + uint64_t(gridDim.y) * blockIdx.z);
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

}  // namespace rlx::cuda
