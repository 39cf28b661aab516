// Argmax over the last dim: one block per row, each thread scans a strided
// slice (kUnroll loads in flight: a decode step's one row of 32000 logits is
// otherwise a chain of dependent round trips), then warp shuffles and one
// pass over the warps' winners. The lowest
// index wins ties; a NaN counts as larger than every number and the first NaN
// wins (torch.argmax / numpy.argmax), so the result equals the CPU kernel's.
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"

namespace rlx::cuda {
namespace {

constexpr int kBlock = 1024;
constexpr int kUnroll = 8;

// True when (v, i) beats (best, at): NaN above numbers, then value, then the lower index.
__device__ __forceinline__ bool beats(float v, int i, float best, int at) {
  const bool vn = v != v, bn = best != best;
  if (vn != bn) return vn;
  if (!vn && v != best) return v > best;
  return i < at;
}

template <class T>
__global__ void argmax_kernel(const ArgmaxParams p, uint8_t* arena) {
  pdl_entry();
  const T* row = at<const T>(arena, p.x) + blockIdx.x * p.cols;
  const int cols = int(p.cols);  // < 2^31: shape inference checks
  float best = 0.f;
  int at_best = cols;  // past the end: loses to any element
  // beats() is a total order, so the order of the visits does not matter.
  for (int c0 = threadIdx.x; c0 < cols; c0 += kUnroll * blockDim.x) {
    float v[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * int(blockDim.x);
      v[u] = c < cols ? to_f32(row[c]) : 0.f;
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int c = c0 + u * int(blockDim.x);
      if (c < cols && (at_best == cols || beats(v[u], c, best, at_best))) {
        best = v[u];
        at_best = c;
      }
    }
  }
  for (int off = 16; off > 0; off >>= 1) {
    const float v = __shfl_down_sync(0xffffffffu, best, off);
    const int i = __shfl_down_sync(0xffffffffu, at_best, off);
    if (i < cols && (at_best == cols || beats(v, i, best, at_best))) {
      best = v;
      at_best = i;
    }
  }
  __shared__ float s_best[kBlock / 32];
  __shared__ int s_at[kBlock / 32];
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  if (lane == 0) {
    s_best[warp] = best;
    s_at[warp] = at_best;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < int(blockDim.x >> 5); ++w)
      if (s_at[w] < cols && (at_best == cols || beats(s_best[w], s_at[w], best, at_best))) {
        best = s_best[w];
        at_best = s_at[w];
      }
    at<int32_t>(arena, p.out)[blockIdx.x] = at_best;
  }
}

void run_argmax(const ArgmaxParams& p, const LaunchContext& ctx) {
  if (p.rows == 0) return;
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(argmax_kernel<T>, unsigned(p.rows), kBlock, 0, ctx, p);
  });
}

}  // namespace

void register_cuda_argmax(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<ArgmaxParams>(dt, run_argmax);
}

}  // namespace rlx::cuda
