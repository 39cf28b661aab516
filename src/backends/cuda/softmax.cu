// Row softmax and softmax cross-entropy, one block per row, f32 accumulation.
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {


namespace {

template <class T>
__global__ void softmax_kernel(const SoftmaxParams p, uint8_t* arena) {
  pdl_entry();
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* x = at<const T>(arena, p.x) + row * p.cols;
  T* out = at<T>(arena, p.out) + row * p.cols;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) m = fmaxf(m, to_f32(x[c]));
  m = block_max(m, scratch);
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x) s += expf(to_f32(x[c]) - m);
  float inv = 1.f / block_sum(s, scratch);
  for (int64_t c = threadIdx.x; c < p.cols; c += blockDim.x)
    out[c] = from_f32<T>(expf(to_f32(x[c]) - m) * inv);
}

template <class T>
__global__ void softmax_xent_kernel(const SoftmaxCEParams p, uint8_t* arena) {
  pdl_entry();
  __shared__ float scratch[32];
  const int64_t row = blockIdx.x;
  const T* x = at<const T>(arena, p.logits) + row * p.classes;
  const int32_t label = at<const int32_t>(arena, p.labels)[row];
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < p.classes; c += blockDim.x) m = fmaxf(m, to_f32(x[c]));
  m = block_max(m, scratch);
  float s = 0.f;
  for (int64_t c = threadIdx.x; c < p.classes; c += blockDim.x) s += expf(to_f32(x[c]) - m);
  s = block_sum(s, scratch);
  if (threadIdx.x == 0) {
    float loss = label >= 0 && label < p.classes ? m + logf(s) - to_f32(x[label]) : NAN;
    at<T>(arena, p.out)[row] = from_f32<T>(loss);
  }
}

}  // namespace

void run_softmax(const SoftmaxParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(softmax_kernel<T>, dim3(unsigned(p.rows)), row_block(p.cols), 0, ctx, p);
  });
}

void run_softmax_xent(const SoftmaxCEParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(softmax_xent_kernel<T>, dim3(unsigned(p.rows)), row_block(p.classes), 0, ctx, p);
  });
}

void register_cuda_softmax(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<SoftmaxParams>(dt, run_softmax);
}

void register_cuda_softmax_xent(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<SoftmaxCEParams>(dt, run_softmax_xent);
}

}  // namespace rlx::cuda
