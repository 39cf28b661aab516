// LayerNorm and RMSNorm over the last axis, one block per row, with the
// optional residual add fused in (writes both the sum and the normalized row).
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

}  // namespace

int row_block(int64_t cols) {
  int64_t b = ((cols + 31) / 32) * 32;
  return int(b < 32 ? 32 : b > 512 ? 512 : b);
}

void run_norm(const NormParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(norm_kernel<T>, dim3(unsigned(p.rows)), row_block(p.cols), 0, ctx, p);
  });
}

}  // namespace rlx::cuda
