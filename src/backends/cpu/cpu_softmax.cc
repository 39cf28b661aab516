// Row-wise softmax over the last axis, max-subtracted for stability.
#include <cmath>
#include <limits>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"
#include "backends/cpu/cpu_vec_math.h"

namespace rlx::cpu {
namespace {

template <class T> void softmax(const SoftmaxParams& p, CpuContext& ctx) {
  const T* x = at<T>(ctx.arena(), p.x);
  T* out = at<T>(ctx.arena(), p.out);
  const int64_t cols = p.cols;
  parallel_for(p.rows, p.rows * cols > 16384, [&](int64_t r) {
    const T* xr = x + r * cols;
    float mx = -std::numeric_limits<float>::infinity();
    for (int64_t c = 0; c < cols; ++c) mx = std::fmax(mx, to_f32(xr[c]));
    float sum = 0.f;
    for (int64_t c = 0; c < cols; ++c) sum += std::exp(to_f32(xr[c]) - mx);
    const float inv = 1.f / sum;
    for (int64_t c = 0; c < cols; ++c) out[r * cols + c] = from_f32<T>(std::exp(to_f32(xr[c]) - mx) * inv);
  });
}

// One f32 row: max, exp and sum, scale; vectorized with exp_approx.
RLX_CPU_CLONES void softmax_row_f32(const float* x, float* out, int64_t cols) {
  float mx = -std::numeric_limits<float>::infinity();
  for (int64_t c = 0; c < cols; ++c) mx = x[c] > mx ? x[c] : mx;
  float sum = 0.f;
  for (int64_t c = 0; c < cols; ++c) {
    out[c] = exp_approx(x[c] - mx);
    sum += out[c];
  }
  const float inv = 1.f / sum;
  for (int64_t c = 0; c < cols; ++c) out[c] *= inv;
}

template <> void softmax<float>(const SoftmaxParams& p, CpuContext& ctx) {
  const float* x = at<float>(ctx.arena(), p.x);
  float* out = at<float>(ctx.arena(), p.out);
  parallel_for(p.rows, p.rows * p.cols > 16384,
               [&](int64_t r) { softmax_row_f32(x + r * p.cols, out + r * p.cols, p.cols); });
}

}  // namespace

void register_cpu_softmax(CpuRegistry& r) {
  r.add<SoftmaxParams>(DType::F32, softmax<float>);
  r.add<SoftmaxParams>(DType::F16, softmax<Half>);
  r.add<SoftmaxParams>(DType::BF16, softmax<BFloat>);
}

}  // namespace rlx::cpu
