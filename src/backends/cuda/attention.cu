// Fused attention: softmax(q k^T * scale + mask) v without materializing the
// score matrix. One block per (query tile, head, batch); key/value tiles are
// staged in shared memory and folded in with an online softmax (running max
// and sum per query row), so memory is O(tile) for any sequence length.
//
// f16/bf16 with head_dim a multiple of 16 (up to 128) and a key length whose
// K and V fit in shared memory take the tensor-core path instead: one block
// of two warps per (32 query rows, head, batch) stages the head's whole K and
// V once with 16-byte loads, computes the 16 x skv score rows of each warp
// with wmma, an exact softmax over them, and P V with wmma again.
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/kernels.h"

#include <mma.h>
#include <type_traits>

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


// ---- tensor-core path ----
namespace wm = nvcuda::wmma;
constexpr int kTcWarps = 2;
constexpr int kTcRows = 16 * kTcWarps;  // query rows per block
constexpr size_t kTcMaxSmem = 200 * 1024;

// Shared memory of one block, byte offsets. Leading dimensions are padded
// (+8 halves, +4 floats) against bank conflicts and keep every wmma tile
// 32-byte aligned.
struct TcLayout {
  int skp, ldk, lds, ldp;
  size_t k, v, q, s, p, m, total;  // m: key validity from the padding mask
};
__host__ __device__ inline TcLayout tc_layout(int64_t skv, int D) {
  TcLayout L;
  L.skp = int((skv + 15) / 16 * 16);
  L.ldk = D + 8;
  L.lds = (L.skp > D ? L.skp : D) + 4;
  L.ldp = L.skp + 8;
  auto up = [](size_t x) { return (x + 127) / 128 * 128; };
  L.k = 0;
  L.v = up(size_t(L.skp) * L.ldk * 2);
  L.q = L.v + up(size_t(L.skp) * L.ldk * 2);
  L.s = L.q + up(size_t(kTcRows) * L.ldk * 2);
  L.p = L.s + up(size_t(kTcWarps) * 16 * L.lds * 4);
  L.m = L.p + up(size_t(kTcWarps) * 16 * L.ldp * 2);
  L.total = L.m + up(size_t(L.skp) * 4);
  return L;
}

// rows x D elements into shared memory (leading dim ld); row r comes from
// src[(row0 + r) * stride + col0 + d], rows >= valid are zero (a NaN there
// would survive a zero probability). 16-byte loads when aligned.
template <class T>
__device__ __forceinline__ void stage_rows(T* dst, int ld, const T* src, uint64_t src_byte_offset, int64_t row0,
                                           int64_t valid, int rows, int64_t stride, int64_t col0, int D) {
  const bool vec = stride % 8 == 0 && col0 % 8 == 0 && src_byte_offset % 16 == 0;
  // Loads are issued in batches into registers before any shared store, so
  // they are in flight together instead of one latency each (the compiler
  // cannot move a global load past a store it may alias).
  constexpr int kBatch = 8;
  if (vec) {
    const int per_row = D / 8, total = rows * per_row;
    for (int base = threadIdx.x; base < total; base += blockDim.x * kBatch) {
      uint4 val[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int idx = base + u * int(blockDim.x), r = idx / per_row, c = (idx % per_row) * 8;
        val[u] = make_uint4(0, 0, 0, 0);
        if (idx < total && r < valid) val[u] = __ldg(reinterpret_cast<const uint4*>(src + (row0 + r) * stride + col0 + c));
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int idx = base + u * int(blockDim.x), r = idx / per_row, c = (idx % per_row) * 8;
        if (idx < total) *reinterpret_cast<uint4*>(dst + r * ld + c) = val[u];
      }
    }
  } else {
    const int total = rows * D;
    for (int base = threadIdx.x; base < total; base += blockDim.x * kBatch) {
      T val[kBatch];
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int idx = base + u * int(blockDim.x), r = idx / D, c = idx % D;
        val[u] = idx < total && r < valid ? src[(row0 + r) * stride + col0 + c] : from_f32<T>(0.f);
      }
#pragma unroll
      for (int u = 0; u < kBatch; ++u) {
        const int idx = base + u * int(blockDim.x), r = idx / D, c = idx % D;
        if (idx < total) dst[r * ld + c] = val[u];
      }
    }
  }
}

template <class T, int DMAX>
__global__ void __launch_bounds__(kTcWarps * 32) attention_tc_kernel(const AttentionParams p, uint8_t* arena) {
  extern __shared__ __align__(128) uint8_t smem[];
  __shared__ float inv_l[kTcRows];
  const int D = p.head_dim;
  const TcLayout L = tc_layout(p.skv, D);
  T* k_s = reinterpret_cast<T*>(smem + L.k);
  T* v_s = reinterpret_cast<T*>(smem + L.v);
  T* q_s = reinterpret_cast<T*>(smem + L.q);
  const int h = blockIdx.y;
  const int64_t b = blockIdx.z;
  const int64_t q0 = int64_t(blockIdx.x) * kTcRows;
  const int kvh = h / (p.q_heads / p.kv_heads);
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  float* s_w = reinterpret_cast<float*>(smem + L.s) + warp * 16 * L.lds;
  T* p_w = reinterpret_cast<T*>(smem + L.p) + warp * 16 * L.ldp;
  const T* q_w = q_s + warp * 16 * L.ldk;
  int32_t* keep = reinterpret_cast<int32_t*>(smem + L.m);
  const int64_t causal_shift = p.skv - p.sq;
  if (p.mask_kind == MaskKind::Padding) {
    const int32_t* mask = at<const int32_t>(arena, p.mask) + b * p.skv;
    for (int j = threadIdx.x; j < p.skv; j += blockDim.x) keep[j] = __ldg(mask + j);
  }

  stage_rows(k_s, L.ldk, at<const T>(arena, p.k), p.k, b * p.skv, p.skv, L.skp, p.k_stride,
             p.k_offset + int64_t(kvh) * D, D);
  stage_rows(v_s, L.ldk, at<const T>(arena, p.v), p.v, b * p.skv, p.skv, L.skp, p.v_stride,
             p.v_offset + int64_t(kvh) * D, D);
  stage_rows(q_s, L.ldk, at<const T>(arena, p.q), p.q, b * p.sq + q0, p.sq - q0, kTcRows, p.q_stride,
             p.q_offset + int64_t(h) * D, D);
  __syncthreads();

  // Scores of this warp's 16 query rows against every key.
  for (int n0 = 0; n0 < L.skp; n0 += 16) {
    wm::fragment<wm::accumulator, 16, 16, 16, float> acc;
    wm::fill_fragment(acc, 0.f);
    for (int d0 = 0; d0 < D; d0 += 16) {
      wm::fragment<wm::matrix_a, 16, 16, 16, T, wm::row_major> a;
      wm::fragment<wm::matrix_b, 16, 16, 16, T, wm::col_major> kt;
      wm::load_matrix_sync(a, q_w + d0, L.ldk);
      wm::load_matrix_sync(kt, k_s + n0 * L.ldk + d0, L.ldk);
      wm::mma_sync(acc, a, kt, acc);
    }
    wm::store_matrix_sync(s_w + n0, acc, L.lds, wm::mem_row_major);
  }
  __syncwarp();

  // Exact softmax per row; P is stored in T for the second product, the sum
  // stays f32. Masked keys and the padding up to skp get probability 0.
  for (int r = 0; r < 16; ++r) {
    const int64_t i = q0 + warp * 16 + r;
    float* srow = s_w + r * L.lds;
    float mx = -INFINITY;
    for (int j = lane; j < p.skv; j += 32) {
      bool ok = p.mask_kind != MaskKind::Padding || keep[j] != 0;
      if (p.mask_kind == MaskKind::Causal) ok = ok && j <= i + causal_shift;
      float sv = ok ? srow[j] * p.scale : -INFINITY;
      srow[j] = sv;
      mx = fmaxf(mx, sv);
    }
    mx = warp_max(mx);
    float sum = 0.f;
    for (int j = lane; j < L.skp; j += 32) {
      float e = 0.f;
      if (j < p.skv && mx != -INFINITY) {
        float sv = srow[j];
        e = sv == -INFINITY ? 0.f : expf(sv - mx);
      }
      sum += e;
      p_w[r * L.ldp + j] = from_f32<T>(e);
    }
    sum = warp_sum(sum);
    if (lane == 0) inv_l[warp * 16 + r] = sum > 0.f ? 1.f / sum : 0.f;  // fully masked row -> zeros
  }
  __syncwarp();

  wm::fragment<wm::accumulator, 16, 16, 16, float> o[DMAX / 16];
#pragma unroll
  for (int c = 0; c < DMAX / 16; ++c) wm::fill_fragment(o[c], 0.f);
  for (int k0 = 0; k0 < L.skp; k0 += 16) {
    wm::fragment<wm::matrix_a, 16, 16, 16, T, wm::row_major> a;
    wm::load_matrix_sync(a, p_w + k0, L.ldp);
#pragma unroll
    for (int c = 0; c < DMAX / 16; ++c) {
      if (c * 16 < D) {
        wm::fragment<wm::matrix_b, 16, 16, 16, T, wm::row_major> vf;
        wm::load_matrix_sync(vf, v_s + k0 * L.ldk + c * 16, L.ldk);
        wm::mma_sync(o[c], a, vf, o[c]);
      }
    }
  }
#pragma unroll
  for (int c = 0; c < DMAX / 16; ++c)
    if (c * 16 < D) wm::store_matrix_sync(s_w + c * 16, o[c], L.lds, wm::mem_row_major);
  __syncwarp();

  T* out = at<T>(arena, p.out);
  for (int idx = lane; idx < 16 * D; idx += 32) {
    const int r = idx / D, d = idx % D;
    const int64_t i = q0 + warp * 16 + r;
    if (i < p.sq)
      out[((b * p.sq + i) * p.q_heads + h) * D + d] = from_f32<T>(s_w[r * L.lds + d] * inv_l[warp * 16 + r]);
  }
}

bool use_tensor_cores(const AttentionParams& p) {
  return (p.dtype == DType::F16 || p.dtype == DType::BF16) && p.head_dim % 16 == 0 && p.head_dim <= 128 &&
         tc_layout(p.skv, p.head_dim).total <= kTcMaxSmem;
}

template <class T>
void launch_tc(const AttentionParams& p, const LaunchContext& ctx) {
  dim3 grid(unsigned((p.sq + kTcRows - 1) / kTcRows), unsigned(p.q_heads), unsigned(p.batch));
  size_t smem = tc_layout(p.skv, p.head_dim).total;
  if (p.head_dim <= 64)
    launch(attention_tc_kernel<T, 64>, grid, kTcWarps * 32, smem, ctx, p);
  else
    launch(attention_tc_kernel<T, 128>, grid, kTcWarps * 32, smem, ctx, p);
}

}  // namespace

void prepare_attention_kernels() {
  auto allow = [](auto kernel) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kTcMaxSmem)),
          "attention shared memory limit");
  };
  allow(attention_tc_kernel<__half, 64>);
  allow(attention_tc_kernel<__half, 128>);
  allow(attention_tc_kernel<__nv_bfloat16, 64>);
  allow(attention_tc_kernel<__nv_bfloat16, 128>);
}

void run_attention(const AttentionParams& p, const LaunchContext& ctx) {
  RLX_CHECK(p.head_dim >= 1 && p.head_dim <= 256,
            std::string("attention ") + ctx.label + ": head_dim " + std::to_string(p.head_dim) +
                " is outside 1..256");
  RLX_CHECK(p.kv_heads >= 1 && p.q_heads % p.kv_heads == 0,
            std::string("attention ") + ctx.label + ": q_heads must be a multiple of kv_heads");
  dim3 grid(unsigned((p.sq + kQueryTile - 1) / kQueryTile), unsigned(p.q_heads), unsigned(p.batch));
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    if constexpr (!std::is_same_v<T, float>) {
      if (use_tensor_cores(p)) return launch_tc<T>(p, ctx);
    }
    if (p.head_dim <= 64)
      launch(attention_kernel<T, 64>, grid, kWarps * 32, 0, ctx, p);
    else if (p.head_dim <= 128)
      launch(attention_kernel<T, 128>, grid, kWarps * 32, 0, ctx, p);
    else
      launch(attention_kernel<T, 256>, grid, kWarps * 32, 0, ctx, p);
  });
}

}  // namespace rlx::cuda
