// The shared work loop of the CPU's mixture-of-experts products (float
// experts: cpu_moe_matmul.cc; block-quantized: cpu_moe_matmul_q.cc): units
// of (row, block of output columns) over the pool; per unit and choice the
// row's x widened to f32 once, the chosen expert's dots for the block, and
// with weights the choices summed in choice order in f32.
#pragma once
#include <algorithm>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"

namespace rlx::cpu {

inline constexpr int64_t kMoeColumnBlock = 32;

// P: MoeMatMulParams or MoeMatMulQParams. Uses scratch slots 0 (x rows), 2
// (sums) and 3 (dots); slot 1 is the kernel's. on_x(worker, xr) runs once
// per x row taken (before that row's dots); dots(worker, e, c0, c1, xr, y)
// writes expert e's dots for columns [c0, c1) to y[0, c1 - c0).
template <class T, class P, class OnX, class Dots>
void run_moe_units(const P& p, CpuContext& ctx, int threads, OnX&& on_x, Dots&& dots) {
  const T* x = at<const T>(ctx.arena(), p.x);
  const int32_t* ids = at<const int32_t>(ctx.arena(), p.ids);
  const T* weights = p.weights == kNoBuffer ? nullptr : at<const T>(ctx.arena(), p.weights);
  T* out = at<T>(ctx.arena(), p.out);
  const int64_t K = p.k, N = p.n, blocks = (N + kMoeColumnBlock - 1) / kMoeColumnBlock;
  float* xs = ctx.scratch(0, size_t(threads * K));
  float* acc = ctx.scratch(2, size_t(threads * kMoeColumnBlock));
  float* ys = ctx.scratch(3, size_t(threads * kMoeColumnBlock));
  parallel_ranges(p.rows * blocks, threads, [&](int64_t lo, int64_t hi, int worker) {
    float* xr = xs + worker * K;
    float* sum = acc + worker * kMoeColumnBlock;
    float* y = ys + worker * kMoeColumnBlock;
    for (int64_t u = lo; u < hi; ++u) {
      const int64_t r = u / blocks, c0 = (u % blocks) * kMoeColumnBlock, c1 = std::min(N, c0 + kMoeColumnBlock);
      std::fill(sum, sum + kMoeColumnBlock, 0.f);
      for (int64_t j = 0; j < p.top_k; ++j) {
        const int32_t e = ids[r * p.top_k + j];
        const bool valid = e >= 0 && e < p.experts;
        if (j == 0 || p.x_choice_stride != 0) {
          const T* xrow = x + r * p.x_row_stride + j * p.x_choice_stride;
          for (int64_t i = 0; i < K; ++i) xr[i] = to_f32(xrow[i]);
          on_x(worker, xr);
        }
        if (valid) dots(worker, e, c0, c1, xr, y);
        else std::fill(y, y + kMoeColumnBlock, 0.f);  // an id outside [0, experts): zeros
        const float scale = weights ? to_f32(weights[r * p.top_k + j]) : 1.f;
        for (int64_t c = c0; c < c1; ++c) {
          if (weights) sum[c - c0] += scale * y[c - c0];
          else out[(r * p.top_k + j) * N + c] = from_f32<T>(y[c - c0]);
        }
      }
      if (weights)
        for (int64_t c = c0; c < c1; ++c) out[r * N + c] = from_f32<T>(sum[c - c0]);
    }
  });
}

}  // namespace rlx::cpu
