#include "backends/cuda/attention_mask.h"

#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"

namespace rlx::cuda {
namespace {

// One block per batch row: bias = 0 where the mask keeps a key, -inf where
// it drops it. A row that keeps no key gets 0 everywhere, so the sequence
// attends to every key (softmax over no key is NaN in cuDNN; Hugging Face
// unmasks these rows for SDPA), as rlx's own kernels and the CPU do.
template <class T>
__global__ void mask_bias_kernel(const MaskBiasParams p, uint8_t* arena) {
  pdl_entry();
  const int64_t b = blockIdx.x;
  const int32_t* mask = at<int32_t>(arena, p.mask) + b * p.skv;
  T* bias = reinterpret_cast<T*>(p.bias_addr) + b * p.skv;
  int kept = 0;
  for (int64_t j = threadIdx.x; j < p.skv && !kept; j += blockDim.x) kept = mask[j] != 0;
  kept = __syncthreads_or(kept);
  for (int64_t j = threadIdx.x; j < p.skv; j += blockDim.x)
    bias[j] = from_f32<T>(!kept || mask[j] != 0 ? 0.f : -INFINITY);
}

}  // namespace

void run_mask_bias(const MaskBiasParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(mask_bias_kernel<T>, dim3(unsigned(p.batch)), 256, 0, ctx, p);
  });
}

}  // namespace rlx::cuda
