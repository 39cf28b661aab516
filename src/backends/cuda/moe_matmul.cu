// Mixture-of-experts products (MoeMatMulParams): a warp per (row, output
// column) dots the row's x with the column's weight row of each chosen
// expert, the ids read from the arena as the kernel runs (nothing on the
// host: the decode step stays one recorded graph). 16-byte loads where
// rows are whole chunks; with weights the choices are summed in choice order
// in f32, as the CPU kernel sums them.
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"

namespace rlx::cuda {
namespace {

constexpr int kWarps = 8;

template <class T, bool Vec>
__global__ void moe_matmul_kernel(const MoeMatMulParams p, uint8_t* arena) {
  pdl_entry();
  const int64_t warp = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (warp >= p.rows * p.n) return;
  const int64_t r = warp / p.n, c = warp % p.n;
  const T* x = at<const T>(arena, p.x);
  const T* w = at<const T>(arena, p.w);
  const int32_t* ids = at<const int32_t>(arena, p.ids);
  const T* weights = p.weights == kNoBuffer ? nullptr : at<const T>(arena, p.weights);
  T* out = at<T>(arena, p.out);
  float sum = 0.f;
  for (int64_t j = 0; j < p.top_k; ++j) {
    const int32_t e = ids[r * p.top_k + j];
    float d = 0.f;
    if (e >= 0 && e < p.experts) {
      const T* xr = x + r * p.x_row_stride + j * p.x_choice_stride;
      const T* wr = w + (int64_t(e) * p.n + c) * p.k;
      if constexpr (Vec) {
        constexpr int kC = kChunkElems<T>;
        const int64_t chunks = p.k / kC;
        const uint4* xv = reinterpret_cast<const uint4*>(xr);
        const uint4* wv = reinterpret_cast<const uint4*>(wr);
        // Unrolled so that several 16-byte loads per lane are in flight (a
        // decode step is a chain of these dots otherwise waiting on memory).
#pragma unroll 4
        for (int64_t ch = lane; ch < chunks; ch += 32) {
          float xf[kC], wf[kC];
          unpack_chunk<T>(xv[ch], xf);
          unpack_chunk<T>(__ldg(wv + ch), wf);
#pragma unroll
          for (int i = 0; i < kC; ++i) d = fmaf(xf[i], wf[i], d);
        }
      } else {
        for (int64_t i = lane; i < p.k; i += 32) d = fmaf(to_f32(xr[i]), to_f32(wr[i]), d);
      }
      d = warp_sum(d);
    }
    if (weights) sum += to_f32(weights[r * p.top_k + j]) * d;
    else if (lane == 0) out[(r * p.top_k + j) * p.n + c] = from_f32<T>(d);
  }
  if (weights && lane == 0) out[r * p.n + c] = from_f32<T>(sum);
}

void run_moe_matmul(const MoeMatMulParams& p, const LaunchContext& ctx) {
  const int64_t warps = p.rows * p.n;
  if (warps == 0) return;
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    // Whole 16-byte chunks: every row starts at a multiple of k elements
    // from offsets the plan aligns to 256 bytes.
    const bool vec = (p.k * int64_t(sizeof(T))) % 16 == 0 && p.x % 16 == 0 && p.w % 16 == 0;
    const unsigned blocks = unsigned((warps + kWarps - 1) / kWarps);
    if (vec) launch(moe_matmul_kernel<T, true>, blocks, kWarps * 32, 0, ctx, p);
    else launch(moe_matmul_kernel<T, false>, blocks, kWarps * 32, 0, ctx, p);
  });
}

}  // namespace

void register_cuda_moe_matmul(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<MoeMatMulParams>(dt, run_moe_matmul);
}

}  // namespace rlx::cuda
