// The matrix-vector products' tiles (gemv.h): what one block of the
// product computes, shared by gemv.cu's kernels (one launch a product) and
// matvec_chain.cu's (several products in one launch, a block taking tile
// after tile). A tile runs `wait` where the kernel would wait for the one
// before it: after its first weight loads, before it reads the arena.
// Chain tiles (Chain = true) read x and the residual through L2 only
// (__ldcg): another block of the same launch wrote them, which the
// read-only path may not see, and stage the norm's gain on their op's first
// tile only.
#pragma once
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/weight_loads.cuh"
#include "thunks/params.h"

namespace rlx::cuda::gemv_tiles {

constexpr int kWarps = 4;   // warps per block
constexpr int kUnroll = 8;  // 16-byte weight loads in flight per lane
constexpr int kRound = 32 * kUnroll;  // chunks a warp has in flight

// The vector side of one round of loads: x's chunks (and gamma's, with Norm)
// for the kUnroll weight chunks a lane has in flight. With Pre they are
// loaded together into registers of their own, one L2 round trip a round;
// without, each is loaded beside its use, and the compiler then waits for
// each in turn (kUnroll round trips a round). Pre holds M * kUnroll more
// chunks in registers, so it is for few rows only. With Pre == kPreGammaShared
// gamma is read from the block's copy in shared memory (stage_gamma) instead
// of registers: 32 registers fewer a thread (126 -> ~94 with Norm), so five
// blocks an SM instead of four.
constexpr int kPreNone = 0, kPreRegisters = 1, kPreGammaShared = 2;

// Blocks an SM must hold: five for one row of x with gamma in shared memory
// (registers capped at 96), else what the registers allow.
template <int M, int Pre>
constexpr int min_blocks() {
  return M == 1 && Pre == kPreGammaShared ? 5 : 1;
}

// Loads of what an earlier op of the same launch may have written: through
// L2 only in a chain (Fresh), the read-only path otherwise.
template <bool Fresh, class V>
__device__ __forceinline__ V load_activation(const V* p) {
  if constexpr (Fresh) return __ldcg(p);
  else return __ldg(p);
}
template <bool Fresh, class V>
__device__ __forceinline__ V load_residual(const V* p) {
  if constexpr (Fresh) return __ldcg(p);
  else return *p;
}

template <class T, int M, bool Norm, int Pre, bool Fresh = false>
struct VectorRound {
  static constexpr bool kX = Pre != kPreNone, kG = Norm && Pre == kPreRegisters;
  static constexpr int kM = kX ? M : 1, kU = kX ? kUnroll : 1, kGU = kG ? kUnroll : 1;
  uint4 xc[kM][kU], gc[kGU];
  const uint4* gamma_shared = nullptr;  // with kPreGammaShared
  __device__ __forceinline__ void load(const uint4* x, int64_t x_row_chunks, const uint4* gamma, int64_t c0,
                                       int64_t end) {
    if constexpr (kX) {
#pragma unroll
      for (int u = 0; u < kUnroll; ++u) {
        const int64_t c = c0 + 32 * u;
        const bool in = c < end;
        if constexpr (kG) gc[u] = in ? __ldg(gamma + c) : make_uint4(0, 0, 0, 0);
#pragma unroll
        for (int m = 0; m < M; ++m) xc[m][u] = in ? load_activation<Fresh>(x + m * x_row_chunks + c) : make_uint4(0, 0, 0, 0);
      }
    }
  }
  __device__ __forceinline__ uint4 x(const uint4* x, int64_t x_row_chunks, int m, int u, int64_t c) const {
    if constexpr (kX) return xc[m][u];
    else return load_activation<Fresh>(x + m * x_row_chunks + c);
  }
  __device__ __forceinline__ uint4 gamma(const uint4* gamma, int u, int64_t c) const {
    if constexpr (kG) return gc[u];
    else if constexpr (Pre == kPreGammaShared) return gamma_shared[c];
    else return __ldg(gamma + c);
  }
};

// With kPreGammaShared: gamma's k / ve chunks into the block's shared memory,
// before the wait for the kernel that writes x where gamma is constant (a
// weight, as it is in every model), else after. Every thread calls it.
// `stage` false: the block's copy is already there (a chain's later tiles).
template <class T, bool Norm, int Pre>
__device__ __forceinline__ const uint4* stage_gamma(const MatMulParams& p, uint8_t* arena, bool before_wait,
                                                    bool stage = true) {
  if constexpr (!Norm || Pre != kPreGammaShared) {
    return nullptr;
  } else {
    extern __shared__ uint4 gamma_shared[];
    if (!stage) return gamma_shared;
    if (before_wait == p.fused.norm_gamma_constant) {
      const uint4* gamma = at<const uint4>(arena, p.fused.norm_gamma);
      for (int64_t c = threadIdx.x; c < p.k / kChunkElems<T>; c += blockDim.x) gamma_shared[c] = __ldg(gamma + c);
    }
    if (!before_wait) __syncthreads();
    return gamma_shared;
  }
}

// The gate of a fused gate/up product: warp w < kCols holds the gate row's
// sums (bias added), warp w + kCols the matching up row's; every thread of
// the block calls this, and `writer` (lane 0 of a live gate warp) stores
// glu(gate) * up for each of the M rows.
template <class T, int M, int kCols>
__device__ __forceinline__ void glu_epilogue(Activation glu, const float (&sums)[M], bool writer, T* out,
                                             int64_t ldc) {
  __shared__ float part[2 * kCols][M];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0)
#pragma unroll
    for (int m = 0; m < M; ++m) part[warp][m] = sums[m];
  __syncthreads();
  if (!writer) return;
#pragma unroll
  for (int m = 0; m < M; ++m) out[m * ldc] = from_f32<T>(apply_activation(glu, part[warp][m]) * part[warp + kCols][m]);
}

// Norm: x is RMS-normalized on the fly (p.fused): every warp reads all of x
// for its row anyway, so it sums x^2 beside x . (gamma * W) and scales the
// dot product by rsqrt(mean(x^2) + eps) at the end; no block-wide step.
// Glu (p.fused.glu): the block's first half of warps take gate rows, the
// second half the up rows n / 2 further on, and the gate warps combine the
// two sums through shared memory: out has n / 2 columns.
// Tile `tile` of the row kernel: kCols output columns (a block of gemv_kernel).
template <class T, int M, bool Norm, int Pre, bool Glu, bool Chain = false, class Wait>
__device__ __forceinline__ void gemv_row_tile(const MatMulParams& p, uint8_t* arena, int64_t tile, Wait wait,
                                              bool first_tile = true) {
  constexpr int ve = kChunkElems<T>;
  constexpr int kCols = Glu ? kWarps / 2 : kWarps;  // output columns per block
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col = tile * kCols + (Glu ? warp % kCols : warp), cols = Glu ? p.n / 2 : p.n;
  const bool live = col < cols;
  const int64_t n = Glu ? col + (warp / kCols) * cols : col;  // the weight row
  const int64_t bt = blockIdx.y;
  const uint4* w = reinterpret_cast<const uint4*>(at<T>(arena, p.b) + bt * p.stride_b + n * p.ldb);
  const int64_t chunks = live ? p.k / ve : 0, x_row_chunks = p.lda / ve;
  uint4 wc[kUnroll];
  const uint64_t policy = weight_load_policy(p.weights_evict_first);
  auto load_weights = [&](int64_t c0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
      wc[u] = c < chunks ? load_weight(w + c, policy) : make_uint4(0, 0, 0, 0);
    }
  };
  // Constant weights: their first loads go out before waiting for the kernel
  // that writes x (pdl_entry), overlapping its tail.
  if (p.b_constant) load_weights(lane);
  stage_gamma<T, Norm, Pre>(p, arena, true, first_tile);
  wait();
  if (!p.b_constant) load_weights(lane);
  VectorRound<T, M, Norm, Pre, Chain> vec;
  vec.gamma_shared = stage_gamma<T, Norm, Pre>(p, arena, false, first_tile);
  if (!Glu && !live) return;  // with Glu every warp meets the block's barrier
  const T* x = at<T>(arena, p.a) + bt * p.stride_a;
  const uint4* gamma = Norm ? at<const uint4>(arena, p.fused.norm_gamma) : nullptr;
  vec.load(reinterpret_cast<const uint4*>(x), x_row_chunks, gamma, lane, chunks);
  float acc[M], ss[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = ss[m] = 0.f;
  for (int64_t c0 = lane; c0 < chunks; c0 += 32 * kUnroll) {
    if (c0 != lane) {
      load_weights(c0);
      vec.load(reinterpret_cast<const uint4*>(x), x_row_chunks, gamma, c0, chunks);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
      if (c >= chunks) break;
      float wf[ve];
      unpack_chunk<T>(wc[u], wf);
      if constexpr (Norm) {
        float gf[ve];
        unpack_chunk<T>(vec.gamma(gamma, u, c), gf);
#pragma unroll
        for (int e = 0; e < ve; ++e) wf[e] *= gf[e];
      }
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[ve];
        unpack_chunk<T>(vec.x(reinterpret_cast<const uint4*>(x), x_row_chunks, m, u, c), xf);
#pragma unroll
        for (int e = 0; e < ve; ++e) {
          acc[m] = fmaf(wf[e], xf[e], acc[m]);
          if constexpr (Norm) ss[m] = fmaf(xf[e], xf[e], ss[m]);
        }
      }
    }
  }
  const float bias = (!Glu || live) && p.bias != kNoBuffer ? to_f32(at<T>(arena, p.bias)[n]) : 0.f;
  const int64_t o = bt * p.stride_out + col;
  const T* residual = p.fused.residual != kNoBuffer ? at<const T>(arena, p.fused.residual) + o : nullptr;
  T* out = at<T>(arena, p.out) + o;
  if constexpr (Glu) {
    float sums[M];
#pragma unroll
    for (int m = 0; m < M; ++m) {
      sums[m] = warp_sum(acc[m]);
      if constexpr (Norm) sums[m] *= rsqrtf(warp_sum(ss[m]) / float(p.k) + p.fused.norm_eps);
      sums[m] += bias;
    }
    glu_epilogue<T, M, kCols>(p.fused.glu, sums, live && warp < kCols && lane == 0, out, p.ldc);
    return;
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float s = warp_sum(acc[m]);
    if constexpr (Norm) s *= rsqrtf(warp_sum(ss[m]) / float(p.k) + p.fused.norm_eps);
    if (lane == 0) {
      float v = apply_activation(p.act, s + bias);
      if (residual) v += to_f32(load_residual<Chain>(residual + m * p.ldc));
      out[m * p.ldc] = from_f32<T>(v);
    }
  }
}

// Its loop repeats gemv_kernel's on purpose: one template for both made the
// short-row products 13-30% slower under ncu at equal registers (PERF.md,
// "Decode-step fusions"), so gemv_kernel stays as measured.
// A row longer than one round of loads (FFN down: 704 chunks of f16) would
// take a lone warp several DRAM round trips one after another: here a
// block's 4 warps take a quarter of one row each, all in flight at once,
// and add their sums (and, with Norm, their sums of x^2) through shared
// memory. With Glu a block takes one output column: half its warps the gate
// row, half the up row, each row in halves.
// Tile `tile` of the split kernel: one output column (a block of
// gemv_split_kernel).
template <class T, int M, bool Norm, int Pre, bool Glu, bool Chain = false, class Wait>
__device__ __forceinline__ void gemv_split_tile(const MatMulParams& p, uint8_t* arena, int64_t tile, Wait wait,
                                                bool first_tile = true) {
  constexpr int Split = Glu ? kWarps / 2 : kWarps;
  constexpr int ve = kChunkElems<T>;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, part = warp % Split;
  const int64_t col = tile, cols = Glu ? p.n / 2 : p.n;
  const int64_t n = Glu ? col + (warp / Split) * cols : col;  // the weight row
  const bool live = col < cols;
  const int64_t bt = blockIdx.y;
  const uint4* w = reinterpret_cast<const uint4*>(at<T>(arena, p.b) + bt * p.stride_b + (live ? n : 0) * p.ldb);
  const int64_t row_chunks = p.k / ve, x_row_chunks = p.lda / ve;
  const int64_t per = (row_chunks + Split - 1) / Split;
  const int64_t begin = part * per, end = live ? (begin + per < row_chunks ? begin + per : row_chunks) : 0;
  uint4 wc[kUnroll];
  const uint64_t policy = weight_load_policy(p.weights_evict_first);
  auto load_weights = [&](int64_t c0) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
      wc[u] = c < end ? load_weight(w + c, policy) : make_uint4(0, 0, 0, 0);
    }
  };
  // Constant weights: their first loads go out before waiting for the kernel
  // that writes x (pdl_entry), overlapping its tail.
  if (p.b_constant) load_weights(begin + lane);
  stage_gamma<T, Norm, Pre>(p, arena, true, first_tile);
  wait();
  if (!p.b_constant) load_weights(begin + lane);
  VectorRound<T, M, Norm, Pre, Chain> vec;
  vec.gamma_shared = stage_gamma<T, Norm, Pre>(p, arena, false, first_tile);
  const T* x = at<T>(arena, p.a) + bt * p.stride_a;
  const uint4* gamma = Norm ? at<const uint4>(arena, p.fused.norm_gamma) : nullptr;
  vec.load(reinterpret_cast<const uint4*>(x), x_row_chunks, gamma, begin + lane, end);
  float acc[M], ss[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = ss[m] = 0.f;
  for (int64_t c0 = begin + lane; c0 < end; c0 += kRound) {
    if (c0 != begin + lane) {
      load_weights(c0);
      vec.load(reinterpret_cast<const uint4*>(x), x_row_chunks, gamma, c0, end);
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = c0 + 32 * u;
      if (c >= end) break;
      float wf[ve];
      unpack_chunk<T>(wc[u], wf);
      if constexpr (Norm) {
        float gf[ve];
        unpack_chunk<T>(vec.gamma(gamma, u, c), gf);
#pragma unroll
        for (int e = 0; e < ve; ++e) wf[e] *= gf[e];
      }
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[ve];
        unpack_chunk<T>(vec.x(reinterpret_cast<const uint4*>(x), x_row_chunks, m, u, c), xf);
#pragma unroll
        for (int e = 0; e < ve; ++e) {
          acc[m] = fmaf(wf[e], xf[e], acc[m]);
          if constexpr (Norm) ss[m] = fmaf(xf[e], xf[e], ss[m]);
        }
      }
    }
  }
#pragma unroll
  for (int m = 0; m < M; ++m) {
    acc[m] = warp_sum(acc[m]);
    if constexpr (Norm) ss[m] = warp_sum(ss[m]);
  }
  if constexpr (Split > 1) {  // the row's first warp adds the others' sums
    __shared__ float parts[kWarps][2 * M];
    if (lane == 0)
#pragma unroll
      for (int m = 0; m < M; ++m) parts[warp][m] = acc[m], parts[warp][M + m] = ss[m];
    __syncthreads();
    if (part != 0) return;
#pragma unroll
    for (int m = 0; m < M; ++m)
      for (int j = 1; j < Split; ++j) acc[m] += parts[warp + j][m], ss[m] += parts[warp + j][M + m];
    if constexpr (Glu) {  // warp 0 has the gate row's sums, warp Split the up row's
      if (!live || lane != 0) return;
      float g[M], u[M];
#pragma unroll
      for (int m = 0; m < M; ++m) {
        g[m] = acc[m], u[m] = 0.f;
        float su = 0.f;
        for (int j = 0; j < Split; ++j) u[m] += parts[Split + j][m], su += parts[Split + j][M + m];
        if constexpr (Norm) {
          g[m] *= rsqrtf(ss[m] / float(p.k) + p.fused.norm_eps);
          u[m] *= rsqrtf(su / float(p.k) + p.fused.norm_eps);
        }
      }
      if (warp != 0) return;
      const T* bias = p.bias != kNoBuffer ? at<T>(arena, p.bias) : nullptr;
      const float bg = bias ? to_f32(bias[col]) : 0.f, bu = bias ? to_f32(bias[col + cols]) : 0.f;
      T* out = at<T>(arena, p.out) + bt * p.stride_out + col;
#pragma unroll
      for (int m = 0; m < M; ++m) out[m * p.ldc] = from_f32<T>(apply_activation(p.fused.glu, g[m] + bg) * (u[m] + bu));
      return;
    }
  }
  if (!live || lane != 0) return;
  const float bias = p.bias != kNoBuffer ? to_f32(at<T>(arena, p.bias)[n]) : 0.f;
  const int64_t o = bt * p.stride_out + n;
  const T* residual = p.fused.residual != kNoBuffer ? at<const T>(arena, p.fused.residual) + o : nullptr;
  T* out = at<T>(arena, p.out) + o;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float s = acc[m];
    if constexpr (Norm) s *= rsqrtf(ss[m] / float(p.k) + p.fused.norm_eps);
    float v = apply_activation(p.act, s + bias);
    if (residual) v += to_f32(load_residual<Chain>(residual + m * p.ldc));
    out[m * p.ldc] = from_f32<T>(v);
  }
}


}  // namespace rlx::cuda::gemv_tiles
