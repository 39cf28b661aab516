// Mixture-of-experts products (MoeMatMulParams): each row times the experts
// its ids choose, the ids read from the arena when the thunk runs. Work is
// split over (row, block of output columns); each unit widens its x rows to
// f32 once and dots them with the chosen experts' weight rows.
#include <algorithm>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"
#include "backends/cpu/cpu_vec_math.h"

namespace rlx::cpu {
namespace {

constexpr int64_t kColumnBlock = 32;

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
  const T* x = at<const T>(ctx.arena(), p.x);
  const T* w = at<const T>(ctx.arena(), p.w);
  const int32_t* ids = at<const int32_t>(ctx.arena(), p.ids);
  const T* weights = p.weights == kNoBuffer ? nullptr : at<const T>(ctx.arena(), p.weights);
  T* out = at<T>(ctx.arena(), p.out);
  const int64_t K = p.k, N = p.n, blocks = (N + kColumnBlock - 1) / kColumnBlock;
  const int threads = p.rows * p.top_k * N * K > (int64_t(1) << 16) ? run_threads() : 1;
  float* xs = ctx.scratch(0, size_t(threads * K));
  float* wide = ctx.scratch(1, size_t(threads * K));
  float* acc = ctx.scratch(2, size_t(threads * kColumnBlock));
  parallel_ranges(p.rows * blocks, threads, [&](int64_t lo, int64_t hi, int worker) {
    float* xr = xs + worker * K;
    float* wr = wide + worker * K;
    float* sum = acc + worker * kColumnBlock;
    for (int64_t u = lo; u < hi; ++u) {
      const int64_t r = u / blocks, c0 = (u % blocks) * kColumnBlock, c1 = std::min(N, c0 + kColumnBlock);
      std::fill(sum, sum + kColumnBlock, 0.f);
      for (int64_t j = 0; j < p.top_k; ++j) {
        const int32_t e = ids[r * p.top_k + j];
        const bool valid = e >= 0 && e < p.experts;
        if (j == 0 || p.x_choice_stride != 0) {
          const T* xrow = x + r * p.x_row_stride + j * p.x_choice_stride;
          for (int64_t i = 0; i < K; ++i) xr[i] = to_f32(xrow[i]);
        }
        const float scale = weights ? to_f32(weights[r * p.top_k + j]) : 1.f;
        for (int64_t c = c0; c < c1; ++c) {
          const float y = valid ? dot(xr, w + (int64_t(e) * N + c) * K, K, wr) : 0.f;
          if (weights) sum[c - c0] += scale * y;
          else out[(r * p.top_k + j) * N + c] = from_f32<T>(y);
        }
      }
      if (weights)
        for (int64_t c = c0; c < c1; ++c) out[r * N + c] = from_f32<T>(sum[c - c0]);
    }
  });
}

}  // namespace

void register_cpu_moe_matmul(CpuRegistry& r) {
  r.add<MoeMatMulParams>(DType::F32, moe_matmul<float>);
  r.add<MoeMatMulParams>(DType::F16, moe_matmul<Half>);
  r.add<MoeMatMulParams>(DType::BF16, moe_matmul<BFloat>);
}

}  // namespace rlx::cpu
