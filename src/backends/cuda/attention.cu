// Fused attention: softmax(q k^T * scale + mask) v without materializing the
// score matrix. One block per (query tile, head, batch); key/value tiles are
// staged in shared memory and folded in with an online softmax (running max
// and sum per query row), so memory is O(tile) for any sequence length.
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {
namespace {

constexpr int kWarps = 4;
constexpr int kRowsPerWarp = 4;
constexpr int kQueryTile = kWarps * kRowsPerWarp;

// Keys per tile, chosen so K, V and q tiles fit in 48 KiB of shared memory.
template <int DMAX>
constexpr int key_tile() { return DMAX <= 64 ? 64 : DMAX <= 128 ? 32 : 8; }

template <class T, int DMAX>
__global__ void __launch_bounds__(kWarps * 32) attention_kernel(const AttentionParams p, uint8_t* arena) {
  constexpr int BK = key_tile<DMAX>();
  constexpr int KPL = (BK + 31) / 32;  // keys per lane
  constexpr int DPL = DMAX / 32;       // output dims per lane
  __shared__ float q_s[kQueryTile][DMAX];
  __shared__ float k_s[BK][DMAX + 1];  // +1: lanes read different rows, no bank conflicts
  __shared__ float v_s[BK][DMAX];
  __shared__ float p_s[kWarps][BK];

  const int D = p.head_dim;
  const int h = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int64_t q0 = int64_t(blockIdx.x) * kQueryTile;
  const int kvh = h / (p.q_heads / p.kv_heads);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const T* q = at<const T>(arena, p.q);
  const T* k = at<const T>(arena, p.k);
  const T* v = at<const T>(arena, p.v);
  const int32_t* mask = p.mask_kind == MaskKind::Padding ? at<const int32_t>(arena, p.mask) : nullptr;
  const int64_t causal_shift = p.skv - p.sq;  // query i sees keys j <= i + shift

  for (int idx = threadIdx.x; idx < kQueryTile * D; idx += blockDim.x) {
    int r = idx / D, d = idx % D;
    int64_t i = q0 + r;
    q_s[r][d] = i < p.sq ? to_f32(q[(b * p.sq + i) * p.q_stride + p.q_offset + int64_t(h) * D + d]) * p.scale : 0.f;
  }

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][DPL];
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    m[r] = -INFINITY;
    l[r] = 0.f;
#pragma unroll
    for (int t = 0; t < DPL; ++t) acc[r][t] = 0.f;
  }

  int64_t kv_end = p.skv;
  if (p.mask_kind == MaskKind::Causal) {
    int64_t last = min(p.sq - 1, q0 + kQueryTile - 1);
    kv_end = min(kv_end, last + causal_shift + 1);
  }

  for (int64_t k0 = 0; k0 < kv_end; k0 += BK) {
    __syncthreads();
    for (int idx = threadIdx.x; idx < BK * D; idx += blockDim.x) {
      int kk = idx / D, d = idx % D;
      int64_t j = k0 + kk;
      float kv = 0.f, vv = 0.f;
      if (j < p.skv) {
        kv = to_f32(k[(b * p.skv + j) * p.k_stride + p.k_offset + int64_t(kvh) * D + d]);
        vv = to_f32(v[(b * p.skv + j) * p.v_stride + p.v_offset + int64_t(kvh) * D + d]);
      }
      k_s[kk][d] = kv;
      v_s[kk][d] = vv;
    }
    __syncthreads();

#pragma unroll
    for (int r = 0; r < kRowsPerWarp; ++r) {
      const int row = warp * kRowsPerWarp + r;
      const int64_t i = q0 + row;
      if (i >= p.sq) continue;  // warp-uniform
      float s[KPL];
      float tile_max = -INFINITY;
#pragma unroll
      for (int t = 0; t < KPL; ++t) {
        int kk = lane + 32 * t;
        int64_t j = k0 + kk;
        bool valid = kk < BK && j < p.skv;
        if (valid && mask) valid = mask[b * p.skv + j] != 0;
        if (valid && p.mask_kind == MaskKind::Causal) valid = j <= i + causal_shift;
        float dot = -INFINITY;
        if (valid) {
          dot = 0.f;
          for (int d = 0; d < D; ++d) dot += q_s[row][d] * k_s[kk][d];
        }
        s[t] = dot;
        tile_max = fmaxf(tile_max, dot);
      }
      tile_max = warp_max(tile_max);
      const float m_new = fmaxf(m[r], tile_max);
      if (m_new == -INFINITY) continue;  // every key so far masked; warp-uniform
      const float corr = expf(m[r] - m_new);
      float psum = 0.f;
#pragma unroll
      for (int t = 0; t < KPL; ++t) {
        int kk = lane + 32 * t;
        float pv = s[t] == -INFINITY ? 0.f : expf(s[t] - m_new);
        psum += pv;
        if (kk < BK) p_s[warp][kk] = pv;
      }
      psum = warp_sum(psum);
      l[r] = l[r] * corr + psum;
      m[r] = m_new;
      __syncwarp();
#pragma unroll
      for (int t = 0; t < DPL; ++t) {
        int d = lane + 32 * t;
        float a = acc[r][t] * corr;
        if (d < D)
          for (int kk = 0; kk < BK; ++kk) a += p_s[warp][kk] * v_s[kk][d];
        acc[r][t] = a;
      }
      __syncwarp();
    }
  }

  T* out = at<T>(arena, p.out);
#pragma unroll
  for (int r = 0; r < kRowsPerWarp; ++r) {
    const int64_t i = q0 + warp * kRowsPerWarp + r;
    if (i >= p.sq) continue;
    const float inv = l[r] > 0.f ? 1.f / l[r] : 0.f;  // fully masked row -> zeros
#pragma unroll
    for (int t = 0; t < DPL; ++t) {
      int d = lane + 32 * t;
      if (d < D) out[((b * p.sq + i) * p.q_heads + h) * D + d] = from_f32<T>(acc[r][t] * inv);
    }
  }
}

}  // namespace

void run_attention(const AttentionParams& p, const LaunchContext& ctx) {
  RLX_CHECK(p.head_dim >= 1 && p.head_dim <= 256,
            std::string("attention ") + ctx.label + ": head_dim " + std::to_string(p.head_dim) +
                " is outside 1..256");
  RLX_CHECK(p.kv_heads >= 1 && p.q_heads % p.kv_heads == 0,
            std::string("attention ") + ctx.label + ": q_heads must be a multiple of kv_heads");
  dim3 grid(unsigned((p.sq + kQueryTile - 1) / kQueryTile), unsigned(p.q_heads), unsigned(p.batch));
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    if (p.head_dim <= 64)
      launch(attention_kernel<T, 64>, grid, kWarps * 32, 0, ctx, p);
    else if (p.head_dim <= 128)
      launch(attention_kernel<T, 128>, grid, kWarps * 32, 0, ctx, p);
    else
      launch(attention_kernel<T, 256>, grid, kWarps * 32, 0, ctx, p);
  });
}

}  // namespace rlx::cuda
