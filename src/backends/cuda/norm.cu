// LayerNorm and RMSNorm over the last axis, one block per row, with the
// optional residual add fused in (writes both the sum and the normalized row).
//
// Rows whose buffers are 16-byte aligned take norm_vec_kernel: each thread
// loads R 16-byte chunks of x, residual, gamma and beta at once (all in
// flight together), keeps the row in registers and writes it back once.
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
    out[c] = from_f32<T>(v);
  }
}

// R chunks per thread; the block has ceil(chunks / R) threads (at most
// kVecThreads), rounded up to a whole warp.
constexpr int kVecThreads = 512;

template <class T, int R>
__global__ void __launch_bounds__(kVecThreads) norm_vec_kernel(const NormParams p, uint8_t* arena) {
  pdl_entry();
  constexpr int ve = kChunkElems<T>;
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const int chunks = int(p.cols / ve);
  const uint4* x = reinterpret_cast<const uint4*>(arena + p.x) + row * chunks;
  const bool has_residual = p.residual != kNoBuffer;
  const uint4* res = has_residual ? reinterpret_cast<const uint4*>(arena + p.residual) + row * chunks : nullptr;
  uint4* sum_out =
      has_residual && p.sum_out != kNoBuffer ? reinterpret_cast<uint4*>(arena + p.sum_out) + row * chunks : nullptr;
  const uint4* gamma = p.gamma != kNoBuffer ? reinterpret_cast<const uint4*>(arena + p.gamma) : nullptr;
  const uint4* beta = p.beta != kNoBuffer ? reinterpret_cast<const uint4*>(arena + p.beta) : nullptr;
  uint4* out = reinterpret_cast<uint4*>(arena + p.out) + row * chunks;

  uint4 xv[R], rv[R], gv[R], bv[R];
  const uint4 zero = make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = threadIdx.x + r * blockDim.x;
    const bool in = c < chunks;
    xv[r] = in ? __ldg(x + c) : zero;
    rv[r] = in && res ? __ldg(res + c) : zero;
    gv[r] = in && gamma ? __ldg(gamma + c) : zero;
    bv[r] = in && beta ? __ldg(beta + c) : zero;
  }

  // The sum is rounded to T, as stored, before it is normalized.
  float v[R][ve];
  float s = 0.f;
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = threadIdx.x + r * blockDim.x;
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
    mean = block_sum(s, scratch) / float(p.cols);
    float q = 0.f;
#pragma unroll
    for (int r = 0; r < R; ++r) {
      if (threadIdx.x + r * blockDim.x >= chunks) continue;  // padding lanes hold zeros, not the mean
#pragma unroll
      for (int e = 0; e < ve; ++e) q += (v[r][e] - mean) * (v[r][e] - mean);
    }
    rstd = rsqrtf(block_sum(q, scratch) / float(p.cols) + p.eps);
  } else {
    rstd = rsqrtf(block_sum(s, scratch) / float(p.cols) + p.eps);
  }
#pragma unroll
  for (int r = 0; r < R; ++r) {
    const int c = threadIdx.x + r * blockDim.x;
    if (c >= chunks) continue;
    float g[ve], bt[ve];
    unpack_chunk<T>(gv[r], g);
    unpack_chunk<T>(bv[r], bt);
#pragma unroll
    for (int e = 0; e < ve; ++e) {
      float y = (v[r][e] - mean) * rstd;
      if (gamma) y *= g[e];
      if (beta) y += bt[e];
      v[r][e] = y;
    }
    out[c] = pack_chunk<T>(v[r]);
  }
}

bool vec_eligible(const NormParams& p, const uint8_t* arena) {
  const int64_t ve = 16 / int64_t(dtype_size(p.dtype));
  if (p.rows <= 0 || p.cols % ve != 0 || p.cols / ve > 4 * kVecThreads) return false;
  for (uint64_t off : {p.x, p.residual, p.gamma, p.beta, p.out, p.sum_out})
    if (off != kNoBuffer && (reinterpret_cast<uintptr_t>(arena) + off) % 16 != 0) return false;
  return true;
}

template <class T>
void launch_vec(const NormParams& p, const LaunchContext& ctx) {
  constexpr int ve = kChunkElems<T>;
  const int64_t chunks = p.cols / ve;
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
  return vec_eligible(p, arena) ? "vec" : "general";
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
