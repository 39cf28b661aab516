// Mixture-of-experts products over block-quantized experts
// (MoeMatMulQParams), rlx/quant.h's layout per expert: a warp per (row,
// output column), each lane one block of 32 weights at a time, decoded in
// registers and dotted in f32 with x; the ids read from the arena as the
// kernel runs, so the step stays one recorded graph. With weights the
// choices are summed in choice order in f32, as the CPU kernel sums them.
// The loader plans quantized experts for the CPU only for now
// (quant_type_runs_on): this kernel is held to the CPU by the op cases.
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "rlx/fp8.h"
#include "rlx/quant.h"

namespace rlx::cuda {
namespace {

constexpr int kWarps = 8;

// The dot of one block of 32 weights (its quants q, scales sc) with x's 32
// values xb.
template <class T>
__device__ __forceinline__ float dot_block(QuantType t, const uint8_t* q, const __half* sc, const T* xb) {
  const float d = __half2float(sc[0]);
  float s = 0.f;
  if (t == QuantType::Q8_0) {
    for (int j = 0; j < 32; ++j) s = fmaf(float(int8_t(q[j])), to_f32(xb[j]), s);
    return d * s;
  }
  if (t == QuantType::FP8) {
    for (int j = 0; j < 32; ++j) s = fmaf(e4m3_to_float(q[j]), to_f32(xb[j]), s);
    return d * s;
  }
  const float offset = t == QuantType::Q4_0 ? 8.f : 0.f;
  float xs = 0.f;
  for (int j = 0; j < 16; ++j) {
    const float lo = float(q[j] & 0x0f) - offset, hi = float(q[j] >> 4) - offset;
    const float x0 = to_f32(xb[j]), x1 = to_f32(xb[j + 16]);
    s = fmaf(lo, x0, fmaf(hi, x1, s));
    xs += x0 + x1;
  }
  return t == QuantType::Q4_1 ? d * s + __half2float(sc[1]) * xs : d * s;
}

template <class T>
__global__ void moe_matmul_q_kernel(const MoeMatMulQParams p, uint8_t* arena) {
  pdl_entry();
  const int64_t warp = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (warp >= p.rows * p.n) return;
  const int64_t r = warp / p.n, c = warp % p.n;
  const int64_t blocks = p.k / kQuantBlock, row_bytes = blocks * quant_block_bytes(p.quant);
  const int64_t per = quant_scales_per_block(p.quant);
  const T* x = at<const T>(arena, p.x);
  const uint8_t* quants = arena + p.quants;
  const __half* scales = at<const __half>(arena, p.scales);
  const int32_t* ids = at<const int32_t>(arena, p.ids);
  const T* weights = p.weights == kNoBuffer ? nullptr : at<const T>(arena, p.weights);
  T* out = at<T>(arena, p.out);
  float sum = 0.f;
  for (int64_t j = 0; j < p.top_k; ++j) {
    const int32_t e = ids[r * p.top_k + j];
    float d = 0.f;
    if (e >= 0 && e < p.experts) {
      const T* xr = x + r * p.x_row_stride + j * p.x_choice_stride;
      const int64_t wr = int64_t(e) * p.n + c;
      for (int64_t b = lane; b < blocks; b += 32)
        d += dot_block<T>(p.quant, quants + wr * row_bytes + b * quant_block_bytes(p.quant),
                          scales + (wr * blocks + b) * per, xr + b * kQuantBlock);
      d = warp_sum(d);
    }
    if (weights) sum += to_f32(weights[r * p.top_k + j]) * d;
    else if (lane == 0) out[(r * p.top_k + j) * p.n + c] = from_f32<T>(d);
  }
  if (weights && lane == 0) out[r * p.n + c] = from_f32<T>(sum);
}

void run_moe_matmul_q(const MoeMatMulQParams& p, const LaunchContext& ctx) {
  const int64_t warps = p.rows * p.n;
  if (warps == 0) return;
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    const unsigned blocks = unsigned((warps + kWarps - 1) / kWarps);
    launch(moe_matmul_q_kernel<T>, blocks, kWarps * 32, 0, ctx, p);
  });
}

}  // namespace

void register_cuda_moe_matmul_q(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<MoeMatMulQParams>(dt, run_moe_matmul_q);
}

}  // namespace rlx::cuda
