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
// RMS-normalized first (RopeParams). I is the index type: 32-bit where the
// count fits, since three 64-bit divisions a thread made a prefill's rope
// issue-bound (13.7 us for a 512-token LLaMA q).
template <class T, class I>
__global__ void rope_kernel(const RopeParams p, uint8_t* arena) {
  pdl_entry();
  const T* x = at<const T>(arena, p.x);
  T* out = at<T>(arena, p.out);
  const int32_t* pos = at<const int32_t>(arena, p.pos);
  const T* gamma = p.gamma != kNoBuffer ? at<const T>(arena, p.gamma) : nullptr;
  const int half = p.n_rot / 2, per_head = half + (p.head_dim - p.n_rot);
  const I total = I(p.batch * p.seq * p.heads * int64_t(per_head)), heads = I(p.heads), seq = I(p.seq);
  for (I t = I(blockIdx.x) * I(blockDim.x) + threadIdx.x; t < total; t += I(gridDim.x) * blockDim.x) {
    const I rh = t / I(per_head);
    const int j = int(t - rh * I(per_head));
    const I row_i = rh / heads;  // b * seq + s
    const int h = int(rh - row_i * heads);
    const int64_t row = int64_t(row_i);
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
    const I b = row_i / seq;
    const int64_t s = int64_t(row_i - b * seq);
    float position = float(p.pos_start ? pos[b] + int32_t(s) : p.pos_batched ? pos[row] : pos[s]);
    rope_pair(src, dst, j, p.n_rot, p.interleaved, p.theta, p.freqs, position, gamma, inv_rms);
  }
}

}  // namespace

void run_rope(const RopeParams& p, const LaunchContext& ctx) {
  int64_t per_head = p.n_rot / 2 + (p.head_dim - p.n_rot);
  const int64_t total = p.batch * p.seq * p.heads * per_head;
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    // 32-bit indices while the grid's last stride step stays below 2^32.
    if (total + 65536 * 256 < (int64_t(1) << 32))
      launch(rope_kernel<T, uint32_t>, grid_for(total, 256), 256, 0, ctx, p);
    else
      launch(rope_kernel<T, int64_t>, grid_for(total, 256), 256, 0, ctx, p);
  });
}

void register_cuda_rope(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<RopeParams>(dt, run_rope);
}

}  // namespace rlx::cuda
