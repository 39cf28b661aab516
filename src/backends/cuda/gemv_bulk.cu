// Matrix-vector products with the weight rows streamed into shared memory by
// the bulk-copy engine (cp.async.bulk, Hopper). gemv_kernel (gemv.cu) holds
// the weights a warp has in flight in registers: 126 registers a thread, four
// blocks an SM, so a 2560-row product runs in two waves and each wave pays a
// DRAM round trip of its own (ncu: 7.4 us for 10.5 MB, 1.4 TB/s). Here a
// block's rows land in shared memory with no register holding them, so an SM
// has up to ~200 KB in flight and most decode products fit one wave; the
// copies of constant weights go out before the wait for the kernel that
// writes x (pdl_entry), so they overlap it.
//
// A block takes R output columns (R rows of W; with Glu also the R matching
// up rows n / 2 further on), one copy and one mbarrier per row, so a warp
// starts on its first row while later rows still arrive. x (and the norm's
// gamma) is staged in shared memory once per block; warp w takes rows w,
// w + kBulkWarps, ...; a lane sums 16-byte chunks lane, lane + 32, ... of
// its row; the epilogue (norm scale, bias, activation or gate, residual) is
// gemv_kernel's.
#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/gemv.h"
#include "backends/cuda/launch.cuh"

namespace rlx::cuda {
namespace {

constexpr int kBulkWarps = 8;
constexpr int kBulkMaxCols = 8;                   // output columns a block takes at most
constexpr int kBulkMaxRows = 2 * kBulkMaxCols;    // weight rows (gate and up with Glu)
constexpr int64_t kBulkWeightBytes = 64 * 1024;   // weight bytes a block aims to hold
constexpr int64_t kBulkMaxSmem = 200 * 1024;      // dynamic shared memory a block may take
constexpr int kBulkMaxM = 2;                      // rows of x (a decode step's batch)

// Output columns a block takes: as many rows as fit kBulkWeightBytes, 1 to
// kBulkMaxCols (g = 2 with Glu: a gate and an up row each).
__host__ __device__ inline int bulk_cols(int64_t row_bytes, int64_t g) {
  const int64_t fit = kBulkWeightBytes / (g * row_bytes);
  return int(fit < 1 ? 1 : fit > kBulkMaxCols ? kBulkMaxCols : fit);
}

struct BulkShape {
  int cols;             // output columns per block (R)
  int64_t row_bytes;    // one weight row
  int64_t smem;         // dynamic shared memory: weight rows, x, gamma
};

BulkShape bulk_shape(const MatMulParams& p) {
  const int64_t es = int64_t(dtype_size(p.dtype)), g = p.fused.glu != Activation::None ? 2 : 1;
  BulkShape s{};
  s.row_bytes = p.k * es;
  s.cols = bulk_cols(s.row_bytes, g);
  s.smem = g * s.cols * s.row_bytes + p.m * p.k * es + (p.fused.norm_gamma != kNoBuffer ? p.k * es : 0);
  return s;
}

__device__ __forceinline__ uint32_t smem_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Waits until the mbarrier at `bar` has completed phase 0 (its row arrived).
__device__ __forceinline__ void wait_row(uint32_t bar) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile(
      "{\n"
      ".reg .pred done;\n"
      "retry:\n"
      "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], 0;\n"
      "@!done bra retry;\n"
      "}\n" ::"r"(bar)
      : "memory");
#endif
}

// Row j of the block: its weight row in W, or -1 past the last column.
__device__ __forceinline__ int64_t weight_row(int j, int R, int64_t c0, int64_t cols) {
  const int64_t col = c0 + j % R;
  return col < cols ? col + (j / R) * cols : -1;
}

template <class T, int M, bool Norm, bool Glu>
__global__ void __launch_bounds__(kBulkWarps * 32) gemv_bulk_kernel(const MatMulParams p, uint8_t* arena) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // bulk copies need Hopper; gemv_bulk_eligible checks
#else
  extern __shared__ uint4 smem[];
  __shared__ alignas(8) uint64_t bars[kBulkMaxRows];
  __shared__ float sums[kBulkMaxRows][M];
  __shared__ float ss_part[kBulkWarps][M];
  constexpr int ve = kChunkElems<T>, G = Glu ? 2 : 1;
  const int R = bulk_cols(p.k * int64_t(sizeof(T)), G), rows = G * R;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int64_t cols = Glu ? p.n / 2 : p.n, c0 = int64_t(blockIdx.x) * R;
  const int64_t kc = p.k / ve;  // 16-byte chunks a row
  uint4* ws = smem;                   // [rows][kc]
  uint4* xs = ws + int64_t(rows) * kc;  // [M][kc]
  uint4* gs = xs + M * kc;            // [kc] with Norm
  if (threadIdx.x < rows) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(smem_address(&bars[threadIdx.x])) : "memory");
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
  }
  __syncthreads();
  // Lane j of warp 0 copies row j.
  auto issue = [&] {
    if (warp != 0 || lane >= rows) return;
    const int64_t row = weight_row(lane, R, c0, cols);
    if (row < 0) return;
    const uint32_t bar = smem_address(&bars[lane]), bytes = uint32_t(p.k * int64_t(sizeof(T)));
    const T* src = at<const T>(arena, p.b) + row * p.ldb;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" ::"r"(
                     smem_address(ws + int64_t(lane) * kc)),
                 "l"(src), "r"(bytes), "r"(bar)
                 : "memory");
  };
  if (p.b_constant) issue();
  pdl_entry();
  if (!p.b_constant) issue();
  // x (and gamma) into shared memory, x^2 summed on the way for the norm.
  const uint4* x = at<const uint4>(arena, p.a);
  const uint4* gamma = Norm ? at<const uint4>(arena, p.fused.norm_gamma) : nullptr;
  const int64_t x_row_chunks = p.lda / ve;
  float ss[M];
#pragma unroll
  for (int m = 0; m < M; ++m) ss[m] = 0.f;
  for (int64_t c = threadIdx.x; c < kc; c += blockDim.x) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const uint4 v = __ldg(x + m * x_row_chunks + c);
      xs[m * kc + c] = v;
      if constexpr (Norm) {
        float f[ve];
        unpack_chunk<T>(v, f);
#pragma unroll
        for (int e = 0; e < ve; ++e) ss[m] = fmaf(f[e], f[e], ss[m]);
      }
    }
    if constexpr (Norm) gs[c] = __ldg(gamma + c);
  }
  if constexpr (Norm) {
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float v = warp_sum(ss[m]);
      if (lane == 0) ss_part[warp][m] = v;
    }
  }
  __syncthreads();
  for (int j = warp; j < rows; j += kBulkWarps) {
    if (weight_row(j, R, c0, cols) < 0) continue;
    wait_row(smem_address(&bars[j]));
    const uint4* wr = ws + int64_t(j) * kc;
    float acc[M];
#pragma unroll
    for (int m = 0; m < M; ++m) acc[m] = 0.f;
#pragma unroll 4
    for (int64_t c = lane; c < kc; c += 32) {
      float wf[ve];
      unpack_chunk<T>(wr[c], wf);
      if constexpr (Norm) {
        float gf[ve];
        unpack_chunk<T>(gs[c], gf);
#pragma unroll
        for (int e = 0; e < ve; ++e) wf[e] *= gf[e];
      }
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[ve];
        unpack_chunk<T>(xs[m * kc + c], xf);
#pragma unroll
        for (int e = 0; e < ve; ++e) acc[m] = fmaf(wf[e], xf[e], acc[m]);
      }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float v = warp_sum(acc[m]);
      if (lane == 0) sums[j][m] = v;
    }
  }
  __syncthreads();
  // One thread per (column, row of x).
  const int t = threadIdx.x, c = t / M, m = t % M;
  if (c >= R || c0 + c >= cols) return;
  const int64_t col = c0 + c;
  float scale = 1.f;
  if constexpr (Norm) {
    float total = 0.f;
    for (int w = 0; w < kBulkWarps; ++w) total += ss_part[w][m];
    scale = rsqrtf(total / float(p.k) + p.fused.norm_eps);
  }
  const T* bias = p.bias != kNoBuffer ? at<const T>(arena, p.bias) : nullptr;
  T* out = at<T>(arena, p.out) + col + m * p.ldc;
  const float s = sums[c][m] * scale + (bias ? to_f32(bias[col]) : 0.f);
  if constexpr (Glu) {
    const float u = sums[R + c][m] * scale + (bias ? to_f32(bias[col + cols]) : 0.f);
    *out = from_f32<T>(apply_activation(p.fused.glu, s) * u);
  } else {
    float v = apply_activation(p.act, s);
    if (p.fused.residual != kNoBuffer) v += to_f32(at<const T>(arena, p.fused.residual)[col + m * p.ldc]);
    *out = from_f32<T>(v);
  }
#endif
}

template <class T, int M, bool Norm, bool Glu>
void launch_bulk(const MatMulParams& p, const LaunchContext& ctx, const BulkShape& s) {
  const int64_t cols = Glu ? p.n / 2 : p.n;
  launch(gemv_bulk_kernel<T, M, Norm, Glu>, dim3(unsigned((cols + s.cols - 1) / s.cols)), kBulkWarps * 32,
         size_t(s.smem), ctx, p);
}

template <class T, int M>
void launch_fused(const MatMulParams& p, const LaunchContext& ctx, const BulkShape& s) {
  const bool norm = p.fused.norm_gamma != kNoBuffer, glu = p.fused.glu != Activation::None;
  if (norm && glu) launch_bulk<T, M, true, true>(p, ctx, s);
  else if (norm) launch_bulk<T, M, true, false>(p, ctx, s);
  else if (glu) launch_bulk<T, M, false, true>(p, ctx, s);
  else launch_bulk<T, M, false, false>(p, ctx, s);
}

// Every instantiation may take kBulkMaxSmem of dynamic shared memory.
template <class T, int M>
void allow_smem() {
  auto allow = [](auto kernel) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(kBulkMaxSmem)),
          "bulk matrix-vector shared memory limit");
  };
  allow(gemv_bulk_kernel<T, M, false, false>);
  allow(gemv_bulk_kernel<T, M, false, true>);
  allow(gemv_bulk_kernel<T, M, true, false>);
  allow(gemv_bulk_kernel<T, M, true, true>);
}

std::atomic<int64_t> g_bulk_launches{0};

}  // namespace

bool gemv_bulk_enabled() {
  const char* e = std::getenv("RLX_GEMV_BULK");
  return !(e && std::strcmp(e, "0") == 0);
}

bool gemv_bulk_eligible(const MatMulParams& p, const uint8_t* arena) {
  if (!gemv_eligible(p, arena) || p.m > kBulkMaxM || p.batch != 1 || !clusters_available()) return false;
  const bool glu = p.fused.glu != Activation::None;
  return (!glu || p.n % 2 == 0) && bulk_shape(p).smem <= kBulkMaxSmem;
}

void prepare_gemv_kernels() {
  if (!clusters_available()) return;
  allow_smem<float, 1>();
  allow_smem<float, 2>();
  allow_smem<__half, 1>();
  allow_smem<__half, 2>();
  allow_smem<__nv_bfloat16, 1>();
  allow_smem<__nv_bfloat16, 2>();
}

int64_t gemv_bulk_launches() { return g_bulk_launches.load(); }

void run_gemv_bulk(const MatMulParams& p, const LaunchContext& ctx) {
  const BulkShape s = bulk_shape(p);
  ++g_bulk_launches;
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    if (p.m == 1) launch_fused<T, 1>(p, ctx, s);
    else launch_fused<T, 2>(p, ctx, s);
  });
}

}  // namespace rlx::cuda
