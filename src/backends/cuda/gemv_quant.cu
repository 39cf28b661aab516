// matmul_q kernels. The matrix-vector product (decode steps, up to
// kMatMulQVectorRows rows): a warp per weight row, each lane one block of
// 32 weights at a time (16 bytes of Q4_0 quants, 32 of Q8_0 or FP8) with
// kUnroll blocks' loads in flight, dequantized in registers and dotted in
// f32 with x, which the block first stages in shared memory as f32 (so each
// x element is converted once per block, not once per weight row). The
// scale multiplies each block's sum; the bias is added before the one store.
// A fused RMSNorm of x is applied while staging it, a residual at the store.
// FP8's e4m3 codes are converted two at a time by the hardware's
// cvt.f16x2.e4m3x2 (exact: every code is a half), then widened to f32.
#include "backends/cuda/gemv_quant.h"

#include <cuda_fp8.h>

#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "rlx/graph.h"
#include "rlx/quant.h"

namespace rlx::cuda {
namespace {

constexpr int kRowsPerBlock = 8;  // warps per thread block, a weight row each
// Floats per 32-element block of x in shared memory: the 4 of padding put
// the lanes of a warp, each reading its own block, on distinct banks.
constexpr int kXStride = 36;
constexpr int kXSmemBytes = 32768;  // staged x per thread block; longer rows go in tiles

template <QuantType Q> constexpr int kChunks = int(quant_block_bytes(Q) / 16);  // 16-byte loads per block
// Blocks of 32 weights per lane in flight (64 bytes of Q4_0, 128 of Q8_0).
// 8 would take a 5632-long Q4_0 row in one round trip, but its registers
// cost a thread block per SM, and most rows (2048 long) fill only 2.
constexpr int kUnroll = 4;

// Tile length in blocks of 32 for M rows of x.
template <int M> constexpr int64_t kTileBlocks = kXSmemBytes / (M * kXStride * 4);

// Byte b of v as a float, minus `offset`: 2^23 + byte is exact in the
// mantissa of 0x4B0000XX, so one permute and one subtract replace a convert.
__device__ __forceinline__ float byte_as_float(uint32_t v, int b, float offset) {
  return __uint_as_float(__byte_perm(v, 0x4B000000u, 0x7650u | unsigned(b))) - (8388608.f + offset);
}

// Bytes 0-1 (lo) and 2-3 (hi) of v as e4m3 codes: {lo.x, lo.y, hi.x, hi.y}
// are bytes 0, 1, 2, 3.
__device__ __forceinline__ void e4m3x4_to_float(uint32_t v, float* w) {
  const float2 lo = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(v & 0xffffu), __NV_E4M3)));
  const float2 hi = __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(__nv_fp8x2_storage_t(v >> 16), __NV_E4M3)));
  w[0] = lo.x, w[1] = lo.y, w[2] = hi.x, w[3] = hi.y;
}

// The 32 weights of one block, unscaled (the q of rlx/quant.h).
template <QuantType Q>
__device__ __forceinline__ void decode_block(const uint4* c, float* w) {
  if constexpr (Q == QuantType::FP8) {
    const uint32_t words[8] = {c[0].x, c[0].y, c[0].z, c[0].w, c[1].x, c[1].y, c[1].z, c[1].w};
#pragma unroll
    for (int i = 0; i < 8; ++i) e4m3x4_to_float(words[i], w + 4 * i);
  } else if constexpr (Q == QuantType::Q4_0) {
    const uint32_t words[4] = {c[0].x, c[0].y, c[0].z, c[0].w};
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const uint32_t lo = words[i] & 0x0f0f0f0fu, hi = (words[i] >> 4) & 0x0f0f0f0fu;
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        w[4 * i + b] = byte_as_float(lo, b, 8.f);
        w[16 + 4 * i + b] = byte_as_float(hi, b, 8.f);
      }
    }
  } else {
    const uint32_t words[8] = {c[0].x, c[0].y, c[0].z, c[0].w, c[1].x, c[1].y, c[1].z, c[1].w};
#pragma unroll
    for (int i = 0; i < 8; ++i) {
      const uint32_t u = words[i] ^ 0x80808080u;  // signed bytes to q + 128
#pragma unroll
      for (int b = 0; b < 4; ++b) w[4 * i + b] = byte_as_float(u, b, 128.f);
    }
  }
}

// Word i (of 4 bytes) of a block's quants, i a constant once unrolled.
template <int kc>
__device__ __forceinline__ uint32_t word(const uint4 (&c)[kc], int i) {
  const uint4& v = c[i / 4];
  return i % 4 == 0 ? v.x : i % 4 == 1 ? v.y : i % 4 == 2 ? v.z : v.w;
}

// s[m] += the block's 32 weights (unscaled) . x row m's 32 values (xb +
// m * x_stride floats), each weight decoded as it is used: no array of 32
// decoded weights held in registers.
template <QuantType Q, int M>
__device__ __forceinline__ void dot_block(const uint4 (&c)[kChunks<Q>], const float* xb, int64_t x_stride, float* s) {
  if constexpr (Q == QuantType::FP8) {
#pragma unroll
    for (int i = 0; i < 8; ++i) {  // bytes 4i..4i+3: elements 4i..4i+3
      float wv[4];
      e4m3x4_to_float(word(c, i), wv);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const float4 xv = reinterpret_cast<const float4*>(xb + m * x_stride)[i];
        s[m] = fmaf(wv[0], xv.x, fmaf(wv[1], xv.y, fmaf(wv[2], xv.z, fmaf(wv[3], xv.w, s[m]))));
      }
    }
  } else if constexpr (Q == QuantType::Q4_0) {
#pragma unroll
    for (int i = 0; i < 4; ++i) {  // bytes 4i..4i+3: elements 4i.. (low nibbles) and 16+4i.. (high)
      const uint32_t lo = word(c, i) & 0x0f0f0f0fu, hi = (word(c, i) >> 4) & 0x0f0f0f0fu;
      float wl[4], wh[4];
#pragma unroll
      for (int b = 0; b < 4; ++b) {
        wl[b] = byte_as_float(lo, b, 8.f);
        wh[b] = byte_as_float(hi, b, 8.f);
      }
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const float4 xl = reinterpret_cast<const float4*>(xb + m * x_stride)[i];
        const float4 xh = reinterpret_cast<const float4*>(xb + m * x_stride)[4 + i];
        s[m] = fmaf(wl[0], xl.x, fmaf(wl[1], xl.y, fmaf(wl[2], xl.z, fmaf(wl[3], xl.w, s[m]))));
        s[m] = fmaf(wh[0], xh.x, fmaf(wh[1], xh.y, fmaf(wh[2], xh.z, fmaf(wh[3], xh.w, s[m]))));
      }
    }
  } else {
#pragma unroll
    for (int i = 0; i < 8; ++i) {  // bytes 4i..4i+3: elements 4i..4i+3
      const uint32_t u = word(c, i) ^ 0x80808080u;  // signed bytes to q + 128
      float wv[4];
#pragma unroll
      for (int b = 0; b < 4; ++b) wv[b] = byte_as_float(u, b, 128.f);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        const float4 xv = reinterpret_cast<const float4*>(xb + m * x_stride)[i];
        s[m] = fmaf(wv[0], xv.x, fmaf(wv[1], xv.y, fmaf(wv[2], xv.z, fmaf(wv[3], xv.w, s[m]))));
      }
    }
  }
}

// x rows [0, M) columns [t0, t1) blocks of 32, as f32 into xs (row m at
// m * tile * kXStride, block c at c * kXStride; tile: blocks of a tile).
// With a fused norm (gamma non-null) each value is staged times gamma and
// its square added to ss[m]; the scale rsqrt(mean(x^2) + eps) applies to
// the finished dot products.
template <class T, int M>
__device__ __forceinline__ void stage_x(const MatMulQParams& p, uint8_t* arena, int64_t t0, int64_t t1,
                                        int64_t tile, const T* gamma, float* xs, float (&ss)[M]) {
  const T* x = at<const T>(arena, p.x);
  const int64_t cols = (t1 - t0) * kQuantBlock;
  if (reinterpret_cast<uintptr_t>(x) % 16 == 0 && (!gamma || reinterpret_cast<uintptr_t>(gamma) % 16 == 0)) {
    constexpr int ve = kChunkElems<T>;
    const int64_t chunks = cols / ve;
#pragma unroll
    for (int m = 0; m < M; ++m) {
      for (int64_t i = threadIdx.x; i < chunks; i += blockDim.x) {
        const int64_t e = i * ve;
        float f[ve];
        unpack_chunk<T>(*reinterpret_cast<const uint4*>(x + m * p.k + t0 * kQuantBlock + e), f);
        if (gamma) {
          float g[ve];
          unpack_chunk<T>(*reinterpret_cast<const uint4*>(gamma + t0 * kQuantBlock + e), g);
#pragma unroll
          for (int j = 0; j < ve; ++j) {
            ss[m] = fmaf(f[j], f[j], ss[m]);
            f[j] *= g[j];
          }
        }
        float* dst = xs + m * tile * kXStride + (e / kQuantBlock) * kXStride + e % kQuantBlock;
#pragma unroll
        for (int j = 0; j < ve; j += 4)
          *reinterpret_cast<float4*>(dst + j) = make_float4(f[j], f[j + 1], f[j + 2], f[j + 3]);
      }
    }
  } else {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      for (int64_t e = threadIdx.x; e < cols; e += blockDim.x) {
        float f = to_f32(x[m * p.k + t0 * kQuantBlock + e]);
        if (gamma) {
          ss[m] = fmaf(f, f, ss[m]);
          f *= to_f32(gamma[t0 * kQuantBlock + e]);
        }
        xs[m * tile * kXStride + (e / kQuantBlock) * kXStride + e % kQuantBlock] = f;
      }
    }
  }
}

// Per row m, rsqrt(mean(x^2) + eps) from every thread's share ss[m] (all
// threads of the block call it; every one gets the scales).
template <int M>
__device__ __forceinline__ void norm_scales(const MatMulQParams& p, float (&ss)[M]) {
  __shared__ float part[kRowsPerBlock][M];
  const int warp = threadIdx.x >> 5;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    const float v = warp_sum(ss[m]);
    if ((threadIdx.x & 31) == 0) part[warp][m] = v;
  }
  __syncthreads();
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float t = 0.f;
    for (int w = 0; w < kRowsPerBlock; ++w) t += part[w][m];
    ss[m] = rsqrtf(t / float(p.k) + p.fused.norm_eps);
  }
}

// Glu (p.fused.glu): the first half of a block's warps take gate rows, the
// second half the up rows n / 2 further on; the gate warps store glu(gate) *
// up, so out has n / 2 columns.
template <class T, QuantType Q, int M, bool Glu>
__global__ void __launch_bounds__(kRowsPerBlock * 32) gemv_quant_kernel(const MatMulQParams p, uint8_t* arena) {
  extern __shared__ float4 smem[];
  float* xs = reinterpret_cast<float*>(smem);
  constexpr int kc = kChunks<Q>, kU = kUnroll;
  constexpr int kCols = Glu ? kRowsPerBlock / 2 : kRowsPerBlock;  // output columns per block
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t col = int64_t(blockIdx.x) * kCols + (Glu ? warp % kCols : warp), cols = Glu ? p.n / 2 : p.n;
  const int64_t row = Glu ? col + (warp / kCols) * cols : col;  // the weight row
  const bool live = col < cols;
  const int64_t blocks = p.k / kQuantBlock;
  // Blocks of 32 per tile: all of a row where it fits (the shared memory
  // launched holds M rows of this many).
  const int64_t tile = blocks < kTileBlocks<M> ? blocks : kTileBlocks<M>;
  const uint4* wq = reinterpret_cast<const uint4*>(arena + p.quants) + (live ? row : 0) * blocks * kc;
  const __half* sc = at<const __half>(arena, p.scales) + (live ? row : 0) * blocks;
  uint4 w[kU][kc];
  __half d[kU];
  auto load = [&](int64_t c0, int64_t end) {
#pragma unroll
    for (int u = 0; u < kU; ++u) {
      const int64_t c = c0 + 32 * u;
      const bool in = live && c < end;
#pragma unroll
      for (int i = 0; i < kc; ++i) w[u][i] = in ? __ldg(wq + c * kc + i) : make_uint4(0, 0, 0, 0);
      d[u] = in ? sc[c] : __float2half(0.f);
    }
  };
  int64_t t1 = tile;
  // Constant weights: the first loads go out before waiting for the kernel
  // that writes x (pdl_entry), overlapping its tail.
  if (p.weights_constant) load(lane, t1);
  pdl_entry();
  if (!p.weights_constant) load(lane, t1);
  const T* gamma = p.fused.norm_gamma != kNoBuffer ? at<const T>(arena, p.fused.norm_gamma) : nullptr;
  float acc[M], ss[M];
#pragma unroll
  for (int m = 0; m < M; ++m) acc[m] = ss[m] = 0.f;
  for (int64_t t0 = 0; t0 < blocks; t0 = t1, t1 = t0 + tile < blocks ? t0 + tile : blocks) {
    if (t0 > 0) __syncthreads();  // every warp is done with the previous tile
    stage_x<T, M>(p, arena, t0, t1, tile, gamma, xs, ss);
    __syncthreads();
    for (int64_t c0 = t0 + lane; c0 < t1; c0 += 32 * kU) {
      if (c0 != lane) load(c0, t1);
#pragma unroll
      for (int u = 0; u < kU; ++u) {
        const int64_t c = c0 + 32 * u;
        if (c >= t1) break;
        float s[M];
#pragma unroll
        for (int m = 0; m < M; ++m) s[m] = 0.f;
        dot_block<Q, M>(w[u], xs + (c - t0) * kXStride, tile * kXStride, s);
        const float scale = __half2float(d[u]);
#pragma unroll
        for (int m = 0; m < M; ++m) acc[m] = fmaf(scale, s[m], acc[m]);
      }
    }
  }
  if (gamma) norm_scales<M>(p, ss);  // block-uniform: every thread takes part
  if constexpr (Glu) {
    const float bias = live && p.bias != kNoBuffer ? to_f32(at<const T>(arena, p.bias)[row]) : 0.f;
    __shared__ float part[kRowsPerBlock][M];
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float s = warp_sum(acc[m]) * (gamma ? ss[m] : 1.f) + bias;
      if (lane == 0) part[warp][m] = s;
    }
    __syncthreads();
    if (!live || warp >= kCols || lane != 0) return;
    T* out = at<T>(arena, p.out) + col;
#pragma unroll
    for (int m = 0; m < M; ++m)
      out[m * cols] = from_f32<T>(apply_activation(p.fused.glu, part[warp][m]) * part[warp + kCols][m]);
    return;
  }
  if (!live) return;
  const float bias = p.bias != kNoBuffer ? to_f32(at<const T>(arena, p.bias)[row]) : 0.f;
  const T* residual = p.fused.residual != kNoBuffer ? at<const T>(arena, p.fused.residual) + row : nullptr;
  T* out = at<T>(arena, p.out) + row;
#pragma unroll
  for (int m = 0; m < M; ++m) {
    float s = warp_sum(acc[m]);
    if (gamma) s *= ss[m];
    if (lane == 0) out[m * p.n] = from_f32<T>(s + bias + (residual ? to_f32(residual[m * p.n]) : 0.f));
  }
}

// One block of 32 weights per thread: scaled, converted to T, stored as
// 16-byte chunks.
template <class T, QuantType Q>
__global__ void dequantize_kernel(const MatMulQParams p, uint8_t* arena) {
  pdl_entry();
  constexpr int kc = kChunks<Q>, ve = kChunkElems<T>;
  const int64_t total = p.n * (p.k / kQuantBlock);
  const uint4* wq = reinterpret_cast<const uint4*>(arena + p.quants);
  const __half* sc = at<const __half>(arena, p.scales);
  uint4* out = reinterpret_cast<uint4*>(arena + p.dequantized);
  for (int64_t b = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; b < total; b += int64_t(gridDim.x) * blockDim.x) {
    uint4 c[kc];
#pragma unroll
    for (int i = 0; i < kc; ++i) c[i] = __ldg(wq + b * kc + i);
    float wf[kQuantBlock];
    decode_block<Q>(c, wf);
    const float scale = __half2float(sc[b]);
#pragma unroll
    for (int j = 0; j < kQuantBlock; ++j) wf[j] *= scale;
#pragma unroll
    for (int j = 0; j < kQuantBlock / ve; ++j) out[b * (kQuantBlock / ve) + j] = pack_chunk<T>(wf + j * ve);
  }
}

template <class T, QuantType Q, int M>
void launch_rows(const MatMulQParams& p, const LaunchContext& ctx) {
  if constexpr (M <= kMatMulQVectorRows) {
    if (p.m == M) {
      const int64_t blocks = p.k / kQuantBlock;
      const int64_t tile = blocks < kTileBlocks<M> ? blocks : kTileBlocks<M>;
      const size_t smem = size_t(M * tile * kXStride) * sizeof(float);
      if (p.fused.glu != Activation::None) {
        constexpr int64_t per_block = kRowsPerBlock / 2;
        launch(gemv_quant_kernel<T, Q, M, true>, dim3(unsigned((p.n / 2 + per_block - 1) / per_block)),
               kRowsPerBlock * 32, smem, ctx, p);
      } else {
        launch(gemv_quant_kernel<T, Q, M, false>, dim3(unsigned((p.n + kRowsPerBlock - 1) / kRowsPerBlock)),
               kRowsPerBlock * 32, smem, ctx, p);
      }
      return;
    }
    launch_rows<T, Q, M + 1>(p, ctx);
  }
}

template <class F>
void dispatch_quant(QuantType q, F&& f) {
  if (q == QuantType::Q4_0) f.template operator()<QuantType::Q4_0>();
  else if (q == QuantType::FP8) f.template operator()<QuantType::FP8>();
  else f.template operator()<QuantType::Q8_0>();
}

}  // namespace

bool gemv_quant_eligible(const MatMulQParams& p, const uint8_t* arena) {
  return p.m >= 1 && p.m <= kMatMulQVectorRows && p.n >= 1 && p.n <= (int64_t(1) << 31) * kRowsPerBlock &&
         p.k % kQuantBlock == 0 && (reinterpret_cast<uintptr_t>(arena) + p.quants) % 16 == 0;
}

void run_gemv_quant(const MatMulQParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    dispatch_quant(p.quant, [&]<QuantType Q>() { launch_rows<T, Q, 1>(p, ctx); });
  });
}

void run_dequantize(const MatMulQParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    dispatch_quant(p.quant, [&]<QuantType Q>() {
      launch(dequantize_kernel<T, Q>, grid_for(p.n * (p.k / kQuantBlock), 256), 256, 0, ctx, p);
    });
  });
}

}  // namespace rlx::cuda
