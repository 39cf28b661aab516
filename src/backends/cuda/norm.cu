// LayerNorm and RMSNorm over the last axis, with the optional residual add
// fused in (writes both the sum and the normalized row). Rows of up to 1024
// get one warp each and stay in registers (warp shuffles only, one read of
// the input); longer rows get a block each.
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {
namespace {

template <class T>
__global__ void norm_kernel(const NormParams p, uint8_t* arena) {
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


constexpr int kNormWarps = 4;  // rows per block on the warp-per-row path

template <class T, int VPL>
__global__ void __launch_bounds__(kNormWarps * 32) norm_warp_kernel(const NormParams p, uint8_t* arena) {
  const int64_t row = int64_t(blockIdx.x) * kNormWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (row >= p.rows) return;  // warp-uniform
  const T* x = at<const T>(arena, p.x) + row * p.cols;
  T* out = at<T>(arena, p.out) + row * p.cols;
  const bool has_residual = p.residual != kNoBuffer;
  const T* res = has_residual ? at<const T>(arena, p.residual) + row * p.cols : nullptr;
  T* sum_out = has_residual && p.sum_out != kNoBuffer ? at<T>(arena, p.sum_out) + row * p.cols : nullptr;
  const T* gamma = p.gamma != kNoBuffer ? at<const T>(arena, p.gamma) : nullptr;
  const T* beta = p.beta != kNoBuffer ? at<const T>(arena, p.beta) : nullptr;
  const bool layer = p.kind == NormKind::Layer;

  // All loads first, then the stores: arena pointers may alias as far as the
  // compiler knows, so a load after a store would wait for it.
  float v[VPL], r[VPL];
#pragma unroll
  for (int t = 0; t < VPL; ++t) {
    const int64_t c = lane + 32 * t;
    v[t] = c < p.cols ? to_f32(x[c]) : 0.f;
    r[t] = res && c < p.cols ? to_f32(res[c]) : 0.f;
  }
  float s = 0.f;
#pragma unroll
  for (int t = 0; t < VPL; ++t) {
    const int64_t c = lane + 32 * t;
    if (res && c < p.cols) v[t] = to_f32(from_f32<T>(v[t] + r[t]));  // the sum as stored
    s += layer ? v[t] : v[t] * v[t];
  }
#pragma unroll
  for (int t = 0; t < VPL; ++t) {
    const int64_t c = lane + 32 * t;
    r[t] = gamma && c < p.cols ? to_f32(gamma[c]) : 1.f;  // r now holds gamma
  }
  float bt[VPL];
#pragma unroll
  for (int t = 0; t < VPL; ++t) {
    const int64_t c = lane + 32 * t;
    bt[t] = beta && c < p.cols ? to_f32(beta[c]) : 0.f;
  }
  if (sum_out) {
#pragma unroll
    for (int t = 0; t < VPL; ++t)
      if (lane + 32 * t < p.cols) sum_out[lane + 32 * t] = from_f32<T>(v[t]);
  }
  const float n = float(p.cols);
  float mean = 0.f, rstd;
  if (layer) {
    mean = warp_sum(s) / n;
    float q = 0.f;
#pragma unroll
    for (int t = 0; t < VPL; ++t) {
      float d = lane + 32 * t < p.cols ? v[t] - mean : 0.f;
      q += d * d;
    }
    rstd = rsqrtf(warp_sum(q) / n + p.eps);
  } else {
    rstd = rsqrtf(warp_sum(s) / n + p.eps);
  }
#pragma unroll
  for (int t = 0; t < VPL; ++t) {
    const int64_t c = lane + 32 * t;
    if (c < p.cols) {
      out[c] = from_f32<T>((v[t] - mean) * rstd * r[t] + bt[t]);
    }
  }
}

}  // namespace

int row_block(int64_t cols) {
  int64_t b = ((cols + 31) / 32) * 32;
  return int(b < 32 ? 32 : b > 512 ? 512 : b);
}

void run_norm(const NormParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    const dim3 warp_grid(unsigned((p.rows + kNormWarps - 1) / kNormWarps));
    if (p.cols <= 256) return launch(norm_warp_kernel<T, 8>, warp_grid, kNormWarps * 32, 0, ctx, p);
    if (p.cols <= 512) return launch(norm_warp_kernel<T, 16>, warp_grid, kNormWarps * 32, 0, ctx, p);
    if (p.cols <= 768) return launch(norm_warp_kernel<T, 24>, warp_grid, kNormWarps * 32, 0, ctx, p);
    if (p.cols <= 1024) return launch(norm_warp_kernel<T, 32>, warp_grid, kNormWarps * 32, 0, ctx, p);
    launch(norm_kernel<T>, dim3(unsigned(p.rows)), row_block(p.cols), 0, ctx, p);
  });
}

}  // namespace rlx::cuda
