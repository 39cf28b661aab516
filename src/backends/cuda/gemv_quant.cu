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

#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/gemv_quant_tiles.cuh"
#include "backends/cuda/launch.cuh"
#include "rlx/graph.h"
#include "rlx/quant.h"

namespace rlx::cuda {
namespace {

using namespace gemv_quant_tiles;

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
