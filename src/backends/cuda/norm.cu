// LayerNorm and RMSNorm over the last axis, one block per row, with the
// optional residual add fused in (writes both the sum and the normalized row)
// or one added after (add_after: a sandwich norm and the residual add).
//
// Rows whose buffers are 16-byte aligned take norm_warp_kernel (short rows,
// a warp each) or norm_vec_kernel (a block each): each thread loads R
// 16-byte chunks of x, residual, gamma and beta at once (all in flight
// together), keeps the row in registers and writes it back once.
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {
namespace {

template <class T>
__global__ void norm_kernel(const NormParams p, uint8_t* arena) {
  pdl_entry();
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* x = at<const T>(arena, p.x) + row * p.cols;
  T* out = at<T>(arena, p.out) + row * p.cols;
  const bool has_residual = p.residual != kNoBuffer;
  const T* res = has_residual ? at<const T>(arena, p.residual) + row * p.cols : nullptr;
  T* sum_out = has_residual && p.sum_out != kNoBuffer ? at<T>(arena, p.sum_out) + row * p.cols : nullptr;
  const T* gamma = p.gamma != kNoBuffer ? at<const T>(arena, p.gamma) : nullptr;
  const T* beta = p.beta != kNoBuffer ? at<const T>(arena, p.beta) : nullptr;
  const T* after = p.add_after != kNoBuffer ? at<const T>(arena, p.add_after) + row * p.cols : nullptr;

  // The sum is rounded to T, as stored, before it is normalized; each thread
  // re-reads only the elements it wrote itself.
  auto value = [&](int64_t c) {
    float v = to_f32(x[c]);
    if (res) v = to_f32(from_f32<T>(v + to_f32(res[c])));
    return v;
  };

  float s = 0.f;
  for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
    float v = value(c);
    if (sum_out) sum_out[c] = from_f32<T>(v);
    s += p.kind == NormKind::Layer ? v : v * v;
  }
  float mean = 0.f, rstd;
  if (p.kind == NormKind::Layer) {
    mean = block_sum(s, scratch) / float(p.cols);
    float q = 0.f;
    for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
      float d = value(c) - mean;
      q += d * d;
    }
    rstd = rsqrtf(block_sum(q, scratch) / float(p.cols) + p.eps);
  } else {
    rstd = rsqrtf(block_sum(s, scratch) / float(p.cols) + p.eps);
  }
  for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) {
    float v = (value(c) - mean) * rstd;
    if (gamma) v *= to_f32(gamma[c]);
    if (beta) v += to_f32(beta[c]);
    if (after) v = to_f32(from_f32<T>(v)) + to_f32(after[c]);
    out[c] = from_f32<T>(v);
  }
}

// One row held in registers by a group of threads (a block or a warp): the
// thread at `first` takes chunks first, first + stride, ... (R of them),
// loads all its chunks of x, residual, gamma and beta at once, and writes its
// chunks of the sum and the normed row once. `sum` adds a value over the
// group.
template <class T, int R, class GroupSum>
__device__ __forceinline__ void norm_row(const NormParams& p, uint8_t* arena, int64_t row, int first, int stride,
                                         GroupSum sum) {
  constexpr int ve = kChunkElems<T>;
  const int chunks = int(p.cols / ve);
  const uint4* x = reinterpret_cast<const uint4*>(arena + p.x) + row * chunks;
  const bool has_residual = p.residual != kNoBuffer;
  const uint4* res = has_residual ? reinterpret_cast<const uint4*>(arena + p.residual) + row * chunks : nullptr;
  uint4* sum_out =
      has_residual && p.sum_out != kNoBuffer ? reinterpret_cast<uint4*>(arena + p.sum_out) + row * chunks : nullptr;
  const uint4* gamma = p.gamma != kNoBuffer ? reinterpret_cast<const uint4*>(arena + p.gamma) : nullptr;
  const uint4* beta = p.beta != kNoBuffer ? reinterpret_cast<const uint4*>(arena + p.beta) : nullptr;
  const uint4* after =
      p.add_after != kNoBuffer ? reinterpret_cast<const uint4*>(arena + p.add_after) + row * chunks : nullptr;
  uint4* out = reinterpret_cast<uint4*>(arena + p.out) + row * chunks;

  uint4 xv[R], rv[R], gv[R], bv[R], av[R];
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = first + r * stride;
    const bool in = c < chunks;
    xv[r] = in ? __ldg(x + c) : zero;
    rv[r] = in && res ? __ldg(res + c) : zero;
    gv[r] = in && gamma ? __ldg(gamma + c) : zero;
    bv[r] = in && beta ? __ldg(beta + c) : zero;
    av[r] = in && after ? __ldg(after + c) : zero;
  }

  // The sum is rounded to T, as stored, before it is normalized.
  float v[R][ve];
  float s = 0.f;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = first + r * stride;
    unpack_chunk<T>(xv[r], v[r]);
    if (res) {
      float rf[ve];
      unpack_chunk<T>(rv[r], rf);
#pragma unroll
      for (int e = 0; e < ve; ++e) v[r][e] = to_f32(from_f32<T>(v[r][e] + rf[e]));
      if (sum_out && c < chunks) sum_out[c] = pack_chunk<T>(v[r]);
    }
#pragma unroll
    for (int e = 0; e < ve; ++e) s += p.kind == NormKind::Layer ? v[r][e] : v[r][e] * v[r][e];
  }
  float mean = 0.f, rstd;
  if (p.kind == NormKind::Layer) {
    mean = sum(s) / float(p.cols);
    float q = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (first + r * stride >= chunks) continue;  // padding lanes hold zeros, not the mean
#pragma unroll
      for (int e = 0; e < ve; ++e) q += (v[r][e] - mean) * (v[r][e] - mean);
    }
    rstd = rsqrtf(sum(q) / float(p.cols) + p.eps);
  } else {
    rstd = rsqrtf(sum(s) / float(p.cols) + p.eps);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = first + r * stride;
    if (c >= chunks) continue;
    float g[ve], bt[ve], a[ve];
    unpack_chunk<T>(gv[r], g);
    unpack_chunk<T>(bv[r], bt);
    unpack_chunk<T>(av[r], a);
#pragma unroll
    for (int e = 0; e < ve; ++e) {
      float y = (v[r][e] - mean) * rstd;
      if (gamma) y *= g[e];
      if (beta) y += bt[e];
      if (after) y = to_f32(from_f32<T>(y)) + a[e];
      v[r][e] = y;
    }
    out[c] = pack_chunk<T>(v[r]);
  }
}

// A block per row: R chunks per thread; the block has ceil(chunks / R)
// threads (at most kVecThreads), rounded up to a whole warp.
constexpr int kVecThreads = 512;

template <class T, int R>
__global__ void __launch_bounds__(kVecThreads) norm_vec_kernel(const NormParams p, uint8_t* arena) {
  pdl_entry();
  __shared__ float scratch[32];
  norm_row<T, R>(p, arena, blockIdx.x, threadIdx.x, blockDim.x, [&](float v) { return block_sum(v, scratch); });
}

// A warp per row, for rows of at most kWarpMaxChunks 16-byte chunks (BERT's
// 384-1024 columns in f16): both reductions by shuffles, no shared memory
// and no block barrier between loading a row and writing it.
constexpr int kWarpMaxChunks = 4 * 32;

template <class T, int R>
__global__ void norm_warp_kernel(const NormParams p, uint8_t* arena) {
  pdl_entry();
  const int64_t row = int64_t(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
  if (row >= p.rows) return;
  norm_row<T, R>(p, arena, row, threadIdx.x % 32, 32, [](float v) { return warp_sum(v); });
}

bool vec_eligible(const NormParams& p, const uint8_t* arena) {
  const int64_t ve = 16 / int64_t(dtype_size(p.dtype));
  if (p.rows <= 0 || p.cols % ve != 0 || p.cols / ve > 4 * kVecThreads) return false;
  for (uint64_t off : {p.x, p.residual, p.gamma, p.beta, p.out, p.sum_out, p.add_after})
    if (off != kNoBuffer && (reinterpret_cast<uintptr_t>(arena) + off) % 16 != 0) return false;
  return true;
}

int64_t chunks_of(const NormParams& p) { return p.cols / (16 / int64_t(dtype_size(p.dtype))); }

template <class T>
void launch_warp(const NormParams& p, const LaunchContext& ctx) {
  // Four rows a block once there are rows enough to fill every SM several
  // times; fewer rows spread one a block over more SMs.
  const int warps = p.rows >= 1024 ? 4 : 1;
  const dim3 grid(unsigned((p.rows + warps - 1) / warps));
  switch ((chunks_of(p) + 31) / 32) {
    case 1: return launch(norm_warp_kernel<T, 1>, grid, 32 * warps, 0, ctx, p);
    case 2: return launch(norm_warp_kernel<T, 2>, grid, 32 * warps, 0, ctx, p);
    case 3: return launch(norm_warp_kernel<T, 3>, grid, 32 * warps, 0, ctx, p);
    default: return launch(norm_warp_kernel<T, 4>, grid, 32 * warps, 0, ctx, p);
  }
}

template <class T>
void launch_vec(const NormParams& p, const LaunchContext& ctx) {
  const int64_t chunks = chunks_of(p);
  if (chunks <= kWarpMaxChunks) return launch_warp<T>(p, ctx);
  auto threads = [&](int r) { return int(((chunks + r - 1) / r + 31) / 32 * 32); };
  const dim3 grid(unsigned(p.rows));
  if (chunks <= kVecThreads) launch(norm_vec_kernel<T, 1>, grid, threads(1), 0, ctx, p);
  else if (chunks <= 2 * kVecThreads) launch(norm_vec_kernel<T, 2>, grid, threads(2), 0, ctx, p);
  else launch(norm_vec_kernel<T, 4>, grid, threads(4), 0, ctx, p);
}

}  // namespace

int row_block(int64_t cols) {
  int64_t b = ((cols + 31) / 32) * 32;
  return int(b < 32 ? 32 : b > 512 ? 512 : b);
}

const char* norm_variant(const NormParams& p, const uint8_t* arena) {
  if (!vec_eligible(p, arena)) return "general";
  return chunks_of(p) <= kWarpMaxChunks ? "warp" : "vec";
}

void run_norm(const NormParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    if (vec_eligible(p, ctx.arena)) return launch_vec<T>(p, ctx);
    launch(norm_kernel<T>, dim3(unsigned(p.rows)), row_block(p.cols), 0, ctx, p);
  });
}

void register_cuda_norm(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<NormParams>(dt, run_norm);
}

}  // namespace rlx::cuda
