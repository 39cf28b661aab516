// Mixture-of-experts products (MoeMatMulParams): each row times the experts
// its ids choose, the ids read from the arena when the thunk runs. Work is
// split over (row, block of output columns) (cpu_moe_units.h); each unit
// widens its x rows to f32 once and dots them with the chosen experts'
// weight rows.
#include <algorithm>

#include "backends/cpu/cpu_moe_units.h"
#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"
#include "backends/cpu/cpu_vec_math.h"

namespace rlx::cpu {
namespace {

// Independent partial sums per lane: a single running sum is a chain the
// compiler may not reorder into vectors.
RLX_CPU_CLONES float dot_f32(const float* x, const float* w, int64_t k) {
  constexpr int kLanes = 16;
  float acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= k; i += kLanes)
    for (int l = 0; l < kLanes; ++l) acc[l] += x[i + l] * w[i + l];
  float sum = 0.f;
  for (int l = 0; l < kLanes; ++l) sum += acc[l];
  for (; i < k; ++i) sum += x[i] * w[i];
  return sum;
}

template <class T> float dot(const float* x, const T* w, int64_t k, float* wide) {
  if constexpr (std::is_same_v<T, float>) {
    (void)wide;
    return dot_f32(x, w, k);
  } else {
    for (int64_t i = 0; i < k; ++i) wide[i] = to_f32(w[i]);
    return dot_f32(x, wide, k);
  }
}

template <class T> void moe_matmul(const MoeMatMulParams& p, CpuContext& ctx) {
  const T* w = at<const T>(ctx.arena(), p.w);
  const int64_t K = p.k, N = p.n;
  const int threads = p.rows * p.top_k * N * K > (int64_t(1) << 16) ? run_threads() : 1;
  float* wide = ctx.scratch(1, size_t(threads * K));
  run_moe_units<T>(
      p, ctx, threads, [](int, const float*) {},
      [&](int worker, int32_t e, int64_t c0, int64_t c1, const float* xr, float* y) {
        for (int64_t c = c0; c < c1; ++c) y[c - c0] = dot(xr, w + (int64_t(e) * N + c) * K, K, wide + worker * K);
      });
}

}  // namespace

void register_cpu_moe_matmul(CpuRegistry& r) {
  r.add<MoeMatMulParams>(DType::F32, moe_matmul<float>);
  r.add<MoeMatMulParams>(DType::F16, moe_matmul<Half>);
  r.add<MoeMatMulParams>(DType::BF16, moe_matmul<BFloat>);
}

}  // namespace rlx::cpu
