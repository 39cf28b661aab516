#include "backends/cuda/matmul_few_rows.h"

#include <cuda_runtime.h>

#include <cooperative_groups.h>

#include <algorithm>
#include <type_traits>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/mma.cuh"

namespace rlx::cuda {
namespace {

constexpr int kTile = 64;      // columns and k of a block's tile; rows are BM (64 or 128)
constexpr int kMaxSplits = 8;  // the portable cluster size

// A block of BM rows has BM / 32 x 2 warps, each on a 32 x 32 part of the tile.
constexpr int threads_for(int bm) { return bm * 2; }
// Dynamic shared memory of one block: each stage holds BM rows of A and 64 of B.
constexpr int smem_bytes(int bm, int stages) { return stages * (bm + kTile) * kTile * 2; }

struct FewRowArgs {
  MatMulParams mm;
  int32_t splits, steps_per_split;  // the blocks of one tile's splits form a cluster along x
};

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
constexpr int kAccum = 32;  // f32 accumulators a thread

// Chunk c (0-7) of tile row r sits at r * 8 + (c ^ r % 8): the eight rows one
// ldmatrix phase reads fall in eight different bank groups.
__device__ __forceinline__ int swizzle(int r, int c) { return r * 8 + (c ^ (r & 7)); }

// Rows [row0, row0 + ROWS) of a row-major operand (ld elements apart), columns
// [k0, k0 + 64), into one stage; rows at or past `rows` read as zeros.
template <class T, int ROWS, int THREADS>
__device__ __forceinline__ void load_tile(uint4* stage, const T* base, int64_t ld, int64_t row0, int64_t rows,
                                          int64_t k0) {
#pragma unroll
  for (int i = 0; i < ROWS * 8 / THREADS; ++i) {
    const int idx = threadIdx.x + i * THREADS, r = idx / 8, c = idx % 8;
    const bool valid = row0 + r < rows;
    cp_async16(stage + swizzle(r, c), base + (valid ? (row0 + r) * ld : 0) + k0 + c * 8, valid);
  }
}

// One stage's 64 k columns into the warp's 32 x 32 accumulators: per 16 k,
// two 16 x 16 fragments of A and four 16 x 8 of B (two ldmatrix.x4 each).
template <class T>
__device__ __forceinline__ void mma_stage(const uint4* as, const uint4* bs, float (&acc)[2][4][4]) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = (warp / 2) * 32, wn = (warp % 2) * 32;
#pragma unroll
  for (int kk = 0; kk < kTile / 16; ++kk) {
    uint32_t a[2][4], b[2][4];
#pragma unroll
    for (int mi = 0; mi < 2; ++mi) ldmatrix_x4(a[mi], as + swizzle(wm + mi * 16 + lane % 16, kk * 2 + lane / 16));
#pragma unroll
    for (int nj = 0; nj < 2; ++nj)
      ldmatrix_x4(b[nj], bs + swizzle(wn + nj * 16 + lane % 8 + (lane / 16) * 8, kk * 2 + (lane / 8) % 2));
#pragma unroll
    for (int mi = 0; mi < 2; ++mi)
#pragma unroll
      for (int ni = 0; ni < 4; ++ni)
        mma_16x8x16<T>(acc[mi][ni], a[mi], b[ni / 2][(ni % 2) * 2], b[ni / 2][(ni % 2) * 2 + 1]);
  }
}

// Elements (row, col) and (row, col + 1) of the output: sums plus bias,
// activated, rounded, where the row is in range (col + 1 < n when col < n,
// n being a multiple of 8).
template <class T>
__device__ __forceinline__ void store_pair(const MatMulParams& p, uint8_t* arena, int64_t row, int64_t col, float x,
                                           float y) {
  if (row >= p.m || col >= p.n) return;
  if (p.bias != kNoBuffer) {
    const T* bias = at<const T>(arena, p.bias);
    x += to_f32(bias[col]);
    y += to_f32(bias[col + 1]);
  }
  x = apply_activation(p.act, x);
  y = apply_activation(p.act, y);
  T* dst = at<T>(arena, p.out) + row * p.ldc + col;
  if constexpr (std::is_same_v<T, __half>)
    *reinterpret_cast<__half2*>(dst) = __floats2half2_rn(x, y);
  else
    *reinterpret_cast<__nv_bfloat162*>(dst) = __floats2bfloat162_rn(x, y);
}

// Accumulator float4 i (0-7) of thread t holds acc[i / 4][i % 4]: rows r and
// r + 8, columns c and c + 1 of the tile, for these r and c (warp t / 32
// covers rows 32 (warp / 2) and columns 32 (warp % 2)).
__device__ __forceinline__ int accum_row(int t, int i) { return (t / 64) * 32 + (i / 4) * 16 + (t % 32) / 4; }
__device__ __forceinline__ int accum_col(int t, int i) { return ((t / 32) % 2) * 32 + (i % 4) * 8 + 2 * (t % 4); }
#endif

// Block (x, y): rows BM y, columns 64 (x / splits), split x % splits of K.
template <class T, int BM, int STAGES>
__global__ void __launch_bounds__(threads_for(BM)) few_row_gemm_kernel(const FewRowArgs args, uint8_t* arena) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
  __trap();  // few_row_gemm_eligible refuses devices and builds without this code
#else
  constexpr int kThreads = threads_for(BM), kStages = STAGES, kPartialChunks = kThreads * kAccum / 4;
  extern __shared__ __align__(128) uint4 smem[];  // per stage: BM rows of A, then 64 rows of B
  auto stage_a = [&](int step) { return smem + (step % kStages) * (BM + kTile) * 8; };
  auto stage_b = [&](int step) { return stage_a(step) + BM * 8; };
  const MatMulParams& p = args.mm;
  const T* a = at<const T>(arena, p.a);
  const T* b = at<const T>(arena, p.b);
  const int split = int(blockIdx.x) % args.splits;  // the block's rank in its cluster
  const int64_t m0 = int64_t(blockIdx.y) * BM, n0 = int64_t(blockIdx.x / args.splits) * kTile;
  const int first = split * args.steps_per_split;
  const int steps = min(args.steps_per_split, int(p.k / kTile) - first);  // >= 1 by the host's split
  auto load_a = [&](int step) {
    load_tile<T, BM, kThreads>(stage_a(step), a, p.lda, m0, p.m, int64_t(first + step) * kTile);
  };
  auto load_b = [&](int step) {
    load_tile<T, kTile, kThreads>(stage_b(step), b, p.ldb, n0, p.n, int64_t(first + step) * kTile);
  };

  // Stages 0 .. kStages-2 in flight before the loop. A constant weight does
  // not depend on the kernel before: its stages go first, in one group,
  // before waiting for that kernel; each stage's A follows in its own group,
  // so the loop's wait (all but the newest kStages-2 groups) still covers the
  // stage it is about to read.
  if (p.b_constant) {
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s)
      if (s < steps) load_b(s);
    cp_async_commit();
    pdl_entry();
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < steps) load_a(s);
      cp_async_commit();
    }
  } else {
    pdl_entry();
#pragma unroll
    for (int s = 0; s < kStages - 1; ++s) {
      if (s < steps) {
        load_a(s);
        load_b(s);
      }
      cp_async_commit();
    }
  }

  float acc[2][4][4] = {};
  for (int step = 0; step < steps; ++step) {
    cp_async_wait<kStages - 2>();
    __syncthreads();  // the stage is in, and every warp is done with the one refilled next
    const int next = step + kStages - 1;
    if (next < steps) {
      load_a(next);
      load_b(next);
    }
    cp_async_commit();
    mma_stage<T>(stage_a(step), stage_b(step), acc);
  }

  if (args.splits > 1) {
    // Each block of the cluster puts its partial tile in its own shared
    // memory; block r then sums slots r, r + splits, ... over all blocks in
    // split order (the bits do not depend on timing) and writes them out.
    namespace cg = cooperative_groups;
    cg::cluster_group cluster = cg::this_cluster();
    __syncthreads();  // every warp is done reading the stages
    float4* part = reinterpret_cast<float4*>(smem);  // kThreads x 128 bytes, within the stages
#pragma unroll
    for (int i = 0; i < kAccum / 4; ++i) {
      const float* v = acc[i / 4][i % 4];
      part[i * kThreads + threadIdx.x] = make_float4(v[0], v[1], v[2], v[3]);
    }
    cluster.sync();
    for (int j = split * kThreads + threadIdx.x; j < kPartialChunks; j += args.splits * kThreads) {
      float4 w[kMaxSplits];
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s)
        if (s < args.splits) w[s] = cluster.map_shared_rank(part, s)[j];
      float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
      for (int s = 0; s < kMaxSplits; ++s)
        if (s < args.splits) sum.x += w[s].x, sum.y += w[s].y, sum.z += w[s].z, sum.w += w[s].w;
      const int t = j % kThreads, i = j / kThreads;
      const int64_t row = m0 + accum_row(t, i), col = n0 + accum_col(t, i);
      store_pair<T>(p, arena, row, col, sum.x, sum.y);
      store_pair<T>(p, arena, row + 8, col, sum.z, sum.w);
    }
    cluster.sync();  // the partials stay until every block has read them
    return;
  }
#pragma unroll
  for (int i = 0; i < kAccum / 4; ++i) {
    const float* v = acc[i / 4][i % 4];
    const int64_t row = m0 + accum_row(threadIdx.x, i), col = n0 + accum_col(threadIdx.x, i);
    store_pair<T>(p, arena, row, col, v[0], v[1]);
    store_pair<T>(p, arena, row + 8, col, v[2], v[3]);
  }
#endif
}

bool aligned16(uint64_t v) { return v % 16 == 0; }

// The kernel of a configuration: rows a block and pipeline stages.
template <class T>
auto kernel_for(int bm) {
  return bm == 128 ? few_row_gemm_kernel<T, 128, 4> : few_row_gemm_kernel<T, 64, 3>;
}
int stages_for(int bm) { return bm == 128 ? 4 : 3; }

// Whether this build carries the kernel's sm_90 code (clusters) for the
// current device.
bool device_runs_kernel() {
  static const bool ok = [] {
    int device = 0, major = 0;
    if (cudaGetDevice(&device) != cudaSuccess) return false;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess) return false;
    cudaFuncAttributes attr{};
    if (cudaFuncGetAttributes(&attr, kernel_for<__half>(64)) != cudaSuccess) return false;
    return major >= 9 && attr.binaryVersion >= 90;
  }();
  return ok;
}

}  // namespace

bool few_row_gemm_eligible(const MatMulParams& p, const uint8_t* arena) {
  if (p.dtype != DType::F16 && p.dtype != DType::BF16) return false;
  const uint64_t es = dtype_size(p.dtype), base = reinterpret_cast<uint64_t>(arena);
  return p.batch == 1 && !p.trans_a && p.trans_b && !p.fused.any() && p.m >= 1 && p.m <= kFewRowMaxRows &&
         p.n >= 8 && p.n % 8 == 0 && p.n <= (int64_t(1) << 24) && p.k >= kTile && p.k % kTile == 0 &&
         aligned16(base + p.a) && aligned16(base + p.b) && aligned16(base + p.out) &&
         aligned16(uint64_t(p.lda) * es) && aligned16(uint64_t(p.ldb) * es) && aligned16(uint64_t(p.ldc) * es) &&
         device_runs_kernel();
}

FewRowGemm::FewRowGemm(const MatMulParams& p, int config, const std::string& label) : p_(p) {
  const std::string what = "few-row GEMM for " + label;
  int device = 0, sms = 132;
  check(cudaGetDevice(&device), what);
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), what);
  config = std::clamp(config, 0, kConfigs - 1);
  bm_ = config < kConfigs / 2 ? 64 : 128;
  const int64_t tiles = ((p.m + bm_ - 1) / bm_) * ((p.n + kTile - 1) / kTile), total = p.k / kTile;
  // About 1, 2 or 4 blocks an SM, each split of whole stages.
  const int64_t target = int64_t(sms) << (config % (kConfigs / 2));
  const int64_t want = std::clamp<int64_t>((target + tiles - 1) / tiles, 1, kMaxSplits);
  steps_per_split_ = int((total + want - 1) / want);
  splits_ = int((total + steps_per_split_ - 1) / steps_per_split_);
  dispatch_float(p.dtype, what.c_str(), [&]<class T>() {
    if constexpr (!std::is_same_v<T, float>)
      check(cudaFuncSetAttribute(kernel_for<T>(bm_), cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 smem_bytes(bm_, stages_for(bm_))),
            what);
  });
}

void FewRowGemm::run(const LaunchContext& ctx) const {
  const FewRowArgs args{p_, splits_, steps_per_split_};
  const dim3 grid(unsigned((p_.n + kTile - 1) / kTile * splits_), unsigned((p_.m + bm_ - 1) / bm_));
  dispatch_float(p_.dtype, ctx.label, [&]<class T>() {
    if constexpr (std::is_same_v<T, float>)
      throw Error(std::string("few-row GEMM for ") + ctx.label + ": f32 is not supported");
    else
      launch(kernel_for<T>(bm_), grid, threads_for(bm_), size_t(smem_bytes(bm_, stages_for(bm_))), ctx, args,
             unsigned(splits_));
  });
}

}  // namespace rlx::cuda
