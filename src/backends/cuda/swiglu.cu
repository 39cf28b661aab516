// Fused SwiGLU / GeGLU: out = act(gate) * up (act silu or GELU, erf or tanh) over [rows, cols], gate and up read at
// an offset and row stride (the halves of one fused gate/up matmul row).
// One grid-stride loop over the output; f32 arithmetic.
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"

namespace rlx::cuda {
namespace {

template <class T>
__global__ void swiglu_kernel(const SwiGluParams p, uint8_t* arena) {
  pdl_entry();
  const T* gate = at<const T>(arena, p.gate);
  const T* up = at<const T>(arena, p.up);
  T* out = at<T>(arena, p.out);
  const int64_t n = p.rows * p.cols;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x) {
    const int64_t r = i / p.cols, c = i % p.cols;
    const float g = to_f32(gate[r * p.gate_stride + p.gate_offset + c]);
    const float u = to_f32(up[r * p.up_stride + p.up_offset + c]);
    out[i] = from_f32<T>(apply_activation(p.act, g) * u);
  }
}

void run_swiglu(const SwiGluParams& p, const LaunchContext& ctx) {
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(swiglu_kernel<T>, grid_for(p.rows * p.cols, 256), 256, 0, ctx, p);
  });
}

}  // namespace

void register_cuda_swiglu(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<SwiGluParams>(dt, run_swiglu);
}

}  // namespace rlx::cuda
