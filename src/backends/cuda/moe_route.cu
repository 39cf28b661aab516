// Mixture-of-experts routing (MoeRouteParams): a warp per row finds the
// softmax's max and sum, then the k experts one pass each (warp shuffles pick
// the best expert not yet taken, in thunks/moe_math.h's order), so the ids
// equal the CPU kernel's.
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"
#include "rlx/graph.h"
#include "thunks/moe_math.h"

namespace rlx::cuda {
namespace {

constexpr int kWarps = 4;

template <class T>
__global__ void moe_route_kernel(const MoeRouteParams p, uint8_t* arena) {
  pdl_entry();
  const int64_t r = int64_t(blockIdx.x) * kWarps + (threadIdx.x >> 5);
  const int lane = threadIdx.x & 31;
  if (r >= p.rows) return;
  const T* row = at<const T>(arena, p.logits) + r * p.experts;
  const int E = int(p.experts);
  float mx = -INFINITY;
  for (int e = lane; e < E; e += 32) mx = fmaxf(mx, moe_route_key(to_f32(row[e])));
  mx = warp_max(mx);
  float sum = 0.f;
  for (int e = lane; e < E; e += 32) sum += expf(moe_route_key(to_f32(row[e])) - mx);
  sum = warp_sum(sum);
  int chosen[kMaxMoeTopK];
  float w[kMaxMoeTopK], chosen_sum = 0.f;
  for (int j = 0; j < p.k; ++j) {
    int best = -1;
    float bv = 0.f;
    for (int e = lane; e < E; e += 32) {
      bool taken = false;
      for (int i = 0; i < j; ++i) taken = taken || chosen[i] == e;
      const float v = to_f32(row[e]);
      if (!taken && (best < 0 || moe_route_before(v, e, bv, best))) {
        best = e;
        bv = v;
      }
    }
    for (int o = 16; o > 0; o >>= 1) {
      const float ov = __shfl_xor_sync(0xffffffffu, bv, o);
      const int ob = __shfl_xor_sync(0xffffffffu, best, o);
      if (ob >= 0 && (best < 0 || moe_route_before(ov, ob, bv, best))) {
        best = ob;
        bv = ov;
      }
    }
    chosen[j] = best;
    w[j] = expf(moe_route_key(bv) - mx) / sum;
    chosen_sum += w[j];
  }
  if (lane == 0) {
    int32_t* ids = at<int32_t>(arena, p.ids) + r * p.k;
    T* weights = at<T>(arena, p.weights) + r * p.k;
    for (int j = 0; j < p.k; ++j) {
      ids[j] = chosen[j];
      weights[j] = from_f32<T>(p.norm_topk ? w[j] / chosen_sum : w[j]);
    }
  }
}

void run_moe_route(const MoeRouteParams& p, const LaunchContext& ctx) {
  if (p.rows == 0) return;
  dispatch_float(p.dtype, ctx.label, [&]<class T>() {
    launch(moe_route_kernel<T>, unsigned((p.rows + kWarps - 1) / kWarps), kWarps * 32, 0, ctx, p);
  });
}

}  // namespace

void register_cuda_moe_route(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<MoeRouteParams>(dt, run_moe_route);
}

}  // namespace rlx::cuda
