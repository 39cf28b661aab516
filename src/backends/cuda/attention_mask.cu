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

// One block per batch row.
template <class T>
__global__ void cache_lens_kernel(const CacheLensParams p, uint8_t* arena) {
  pdl_entry();
  const int64_t b = blockIdx.x;
  const int64_t start = max(int64_t(0), int64_t(at<const int32_t>(arena, p.pos)[b]));
  const int64_t seq_q = max(int64_t(0), min(p.sq, p.skv - start));
  int32_t* lens = reinterpret_cast<int32_t*>(p.lens_addr);
  if (threadIdx.x == 0) {
    lens[b] = int32_t(seq_q);
    lens[p.batch + b] = int32_t(start + seq_q);
  }
  if (p.pages > 0) {
    // Clamped into the pool as rlx's kernels do (the host checks the slots).
    const int64_t slot = min(max(int64_t(at<const int32_t>(arena, p.kv_slots)[b]), int64_t(0)), p.kv_batch - 1);
    for (int64_t i = threadIdx.x; i < p.pages; i += blockDim.x)
      lens[2 * p.batch + b * p.pages + i] = int32_t(slot * p.pages + i);
  }
  T* out = at<T>(arena, p.out) + (b * p.sq + seq_q) * p.row;
  for (int64_t i = threadIdx.x; i < (p.sq - seq_q) * p.row; i += blockDim.x) out[i] = from_f32<T>(0.f);
}

}  // namespace

void run_cache_lens(const CacheLensParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(cache_lens_kernel<T>, dim3(unsigned(p.batch)), 256, 0, ctx, p);
  });
}

void run_mask_bias(const MaskBiasParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(mask_bias_kernel<T>, dim3(unsigned(p.batch)), 256, 0, ctx, p);
  });
}

}  // namespace rlx::cuda
