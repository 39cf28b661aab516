// Rotary position embedding, half-split (NeoX) or interleaved (GPT-J) pairs.
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/kernels.h"
#include "backends/cuda/rope_math.cuh"

namespace rlx::cuda {
namespace {

// One thread per (row, head, pair-or-tail element): each head has n_rot/2
// rotated pairs and head_dim - n_rot copied dims; with gamma, the head is
// RMS-normalized first (RopeParams).
template <class T>
__global__ void rope_kernel(const RopeParams p, uint8_t* arena) {
  pdl_entry();
  const T* x = at<const T>(arena, p.x);
  T* out = at<T>(arena, p.out);
  const int32_t* pos = at<const int32_t>(arena, p.pos);
  const T* gamma = p.gamma != kNoBuffer ? at<const T>(arena, p.gamma) : nullptr;
  const int half = p.n_rot / 2, per_head = half + (p.head_dim - p.n_rot);
  const int64_t total = p.batch * p.seq * p.heads * int64_t(per_head);
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total;
       t += int64_t(gridDim.x) * blockDim.x) {
    int j = int(t % per_head);
    int64_t rh = t / per_head;
    int h = int(rh % p.heads);
    int64_t row = rh / p.heads;  // b * seq + s
    const T* src = x + row * p.stride + p.offset + int64_t(h) * p.head_dim;
    T* dst = out + (row * p.heads + h) * p.head_dim;
    // With a head norm each thread sums its head's squares itself: a head
    // is a few hundred bytes, read from L1 by its threads.
    const float inv_rms = gamma ? head_inv_rms(src, p.head_dim, p.norm_eps) : 1.f;
    if (j >= half) {  // a copied tail dim
      int d = p.n_rot + (j - half);
      dst[d] = from_f32<T>(head_element(src, d, gamma, inv_rms));
      continue;
    }
    int64_t s = row % p.seq;
    float position = float(p.pos_start ? pos[row / p.seq] + int32_t(s) : p.pos_batched ? pos[row] : pos[s]);
    rope_pair(src, dst, j, p.n_rot, p.interleaved, p.theta, p.freqs, position, gamma, inv_rms);
  }
}

}  // namespace

void run_rope(const RopeParams& p, const LaunchContext& ctx) {
  int64_t per_head = p.n_rot / 2 + (p.head_dim - p.n_rot);
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(rope_kernel<T>, grid_for(p.batch * p.seq * p.heads * per_head, 256), 256, 0, ctx, p);
  });
}

void register_cuda_rope(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<RopeParams>(dt, run_rope);
}

}  // namespace rlx::cuda
