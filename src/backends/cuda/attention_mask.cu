#include "backends/cuda/attention_mask.h"

#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"

namespace rlx::cuda {
namespace {

// One block per batch row: bias = 0 where the mask keeps a key, -inf where
// it drops it; dead[b] says whether it dropped them all.
template <class T>
__global__ void mask_bias_kernel(const MaskBiasParams p, uint8_t* arena) {
  pdl_entry();
  const int64_t b = blockIdx.x;
  const int32_t* mask = at<int32_t>(arena, p.mask) + b * p.skv;
  T* bias = reinterpret_cast<T*>(p.bias_addr) + b * p.skv;
  int kept = 0;
  for (int64_t j = threadIdx.x; j < p.skv; j += blockDim.x) {
    const bool keep = mask[j] != 0;
    kept |= keep;
    bias[j] = from_f32<T>(keep ? 0.f : -INFINITY);
  }
  kept = __syncthreads_or(kept);
  if (threadIdx.x == 0) reinterpret_cast<int32_t*>(p.dead_addr)[b] = kept ? 0 : 1;
}

// Zeroes the output rows of batches whose keys are all masked (softmax over
// nothing), matching the CPU reference; other blocks return at once.
template <class T>
__global__ void zero_dead_rows_kernel(const MaskBiasParams p, uint8_t* arena) {
  pdl_entry();
  const int64_t b = blockIdx.y;
  if (reinterpret_cast<const int32_t*>(p.dead_addr)[b] == 0) return;
  T* out = at<T>(arena, p.out) + b * p.sq * p.row;
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < p.sq * p.row;
       t += int64_t(gridDim.x) * blockDim.x)
    out[t] = from_f32<T>(0.f);
}

}  // namespace

void run_mask_bias(const MaskBiasParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(mask_bias_kernel<T>, dim3(unsigned(p.batch)), 256, 0, ctx, p);
  });
}

void run_zero_dead_rows(const MaskBiasParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(zero_dead_rows_kernel<T>, dim3(4, unsigned(p.batch)), 256, 0, ctx, p);
  });
}

}  // namespace rlx::cuda
