// The quantized matrix-vector product's pieces (gemv_quant.h): weights
// decoded in registers and dotted with x staged in shared memory as f32,
// shared by gemv_quant.cu's kernel (one launch a product) and
// matvec_chain_quant.cu's (several products in one launch). With Fresh, x
// is read through L2 only (__ldcg): in a chain another block of the same
// launch wrote it, which a cached load on this SM may not see.
#pragma once
#include <cuda_fp8.h>

#include "backends/cuda/device_types.cuh"
#include "rlx/quant.h"
#include "thunks/params.h"

namespace rlx::cuda::gemv_quant_tiles {

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

// x as the kernel before wrote it (plain load), or through L2 only (Fresh).
template <bool Fresh, class V>
__device__ __forceinline__ V load_x(const V* p) {
  if constexpr (Fresh) return __ldcg(p);
  else return *p;
}

// x rows [0, M) columns [t0, t1) blocks of 32, as f32 into xs (row m at
// m * tile * kXStride, block c at c * kXStride; tile: blocks of a tile).
// With a fused norm (gamma non-null) each value is staged times gamma and
// its square added to ss[m]; the scale rsqrt(mean(x^2) + eps) applies to
// the finished dot products.
template <class T, int M, bool Fresh = false>
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
        const uint4* xc = reinterpret_cast<const uint4*>(x + m * p.k + t0 * kQuantBlock + e);
        if constexpr (Fresh) unpack_chunk<T>(__ldcg(xc), f);
        else unpack_chunk<T>(*xc, f);
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
        float f = to_f32(load_x<Fresh>(x + m * p.k + t0 * kQuantBlock + e));
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

}  // namespace rlx::cuda::gemv_quant_tiles
