// The one way a kernel is launched. Every kernel has the signature
//   __global__ void k(const XParams p, uint8_t* arena)
// and receives its params struct by value. The params type is deduced from the
// kernel and from the argument together, so passing the wrong struct is a
// compile error rather than a kernel that reads garbage and writes nothing.
//
// On Hopper every launch allows programmatic dependent launch: the kernel may
// start while the one before it finishes, and waits inside (pdl_entry in
// device_types.cuh) before it touches the arena. Every kernel launched here
// must therefore begin with pdl_entry() (or, like gemv, read only constants
// before it). RLX_PDL=0 launches without it; RLX_PDL_OFF_FOR=a,b launches
// the thunks whose label contains a or b without it (for measuring).
#pragma once
#include <cuda_runtime.h>

#include <cstdint>
#include <string>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/launch_context.h"

namespace rlx::cuda {

bool pdl_enabled();         // compute capability >= 9.0 and RLX_PDL != 0; decided once
bool pdl_off_for(const char* label);  // RLX_PDL_OFF_FOR names part of this label
bool clusters_available();  // compute capability >= 9.0
int multiprocessor_count();  // of the current device
// Whether a matrix-vector launch loads its weights evict-first from L2
// (weight_loads.cuh): constant ones unless RLX_WEIGHTS_EVICT_FIRST=0 (read
// per launch); counted for tests.
uint8_t evict_first_weights(bool constant);
int64_t evict_first_launches();

// cluster_x > 1 launches thread-block clusters of that many blocks along x
// (grid.x a multiple of it). cooperative: every block of the grid resident at
// once or the launch fails (a grid whose blocks wait on each other; two such
// grids on two streams then cannot each hold part of the GPU).
template <class P>
void launch(void (*kernel)(P, uint8_t*), dim3 grid, dim3 block, size_t smem,
            const LaunchContext& ctx, const P& p, unsigned cluster_x = 1, bool cooperative = false) {
  cudaLaunchAttribute attrs[3] = {};
  unsigned n = 0;
  if (pdl_enabled() && !pdl_off_for(ctx.label)) {
    attrs[n].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attrs[n++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (cluster_x > 1) {
    attrs[n].id = cudaLaunchAttributeClusterDimension;
    attrs[n].val.clusterDim.x = cluster_x;
    attrs[n].val.clusterDim.y = 1;
    attrs[n++].val.clusterDim.z = 1;
  }
  if (cooperative) {
    attrs[n].id = cudaLaunchAttributeCooperative;
    attrs[n++].val.cooperative = 1;
  }
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = ctx.stream;
  cfg.attrs = attrs;
  cfg.numAttrs = n;
  cudaError_t e = cudaLaunchKernelEx(&cfg, kernel, p, ctx.arena);
  if (e == cudaSuccess) e = cudaGetLastError();
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
