// The one way a kernel is launched. Every kernel has the signature
//   __global__ void k(const XParams p, uint8_t* arena)
// and receives its params struct by value. The params type is deduced from the
// kernel and from the argument together, so passing the wrong struct is a
// compile error rather than a kernel that reads garbage and writes nothing.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch_context.h"

namespace rlx::cuda {

template <class P>
void launch(void (*kernel)(P, uint8_t*), dim3 grid, dim3 block, size_t smem,
            const LaunchContext& ctx, const P& p) {
  kernel<<<grid, block, smem, ctx.stream>>>(p, ctx.arena);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess)
    throw Error(std::string("kernel launch failed for ") + ctx.label + ": " + cudaGetErrorString(e));
}

// Grid size for a grid-stride loop over n items.
inline unsigned grid_for(int64_t n, int block, int64_t cap = 65536) {
  int64_t g = (n + block - 1) / block;
  if (g < 1) g = 1;
  if (g > cap) g = cap;
  return unsigned(g);
}

}  // namespace rlx::cuda
