// LayerNorm / RMSNorm over the last axis, optionally fused with a residual
// add whose sum is also written out (sum_out), or with one added after
// (add_after, a sandwich norm's residual).
#include <cmath>
#include <vector>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_storage.h"
#include "backends/cpu/cpu_norm_row.h"
#include "backends/cpu/cpu_vec_math.h"

namespace rlx::cpu {

// Two vectorized passes over v for the mean and the centered variance.
RLX_CPU_CLONES void norm_row_f32(const float* x, const float* res, const float* gamma, const float* beta,
                                 float* out, float* sum_out, int64_t cols, bool layer, float eps) {
  const float* v = x;
  if (res) {
    float* dst = sum_out ? sum_out : out;  // out is written element by element after v, so it can hold v
    for (int64_t c = 0; c < cols; ++c) dst[c] = x[c] + res[c];
    v = dst;
  }
  float mean = 0.f;
  if (layer) {
    for (int64_t c = 0; c < cols; ++c) mean += v[c];
    mean /= float(cols);
  }
  float sq = 0.f;
  for (int64_t c = 0; c < cols; ++c) sq += (v[c] - mean) * (v[c] - mean);
  const float inv = 1.f / std::sqrt(sq / float(cols) + eps);
  for (int64_t c = 0; c < cols; ++c) {
    float y = (v[c] - mean) * inv;
    if (gamma) y *= gamma[c];
    if (beta) y += beta[c];
    out[c] = y;
  }
}

namespace {

// f16/bf16: each row widened to f32 (the residual sum rounded as it is
// stored, so fused == add then norm), normalized by the f32 row kernel,
// narrowed back.
template <class T> void norm(const NormParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const T* x = at<T>(arena, p.x);
  const T* res = p.residual == kNoBuffer ? nullptr : at<T>(arena, p.residual);
  const T* gamma = p.gamma == kNoBuffer ? nullptr : at<T>(arena, p.gamma);
  const T* beta = p.beta == kNoBuffer ? nullptr : at<T>(arena, p.beta);
  T* out = at<T>(arena, p.out);
  T* sum_out = p.sum_out == kNoBuffer ? nullptr : at<T>(arena, p.sum_out);
  const T* after = p.add_after == kNoBuffer ? nullptr : at<T>(arena, p.add_after);
  const int64_t cols = p.cols;
  // gamma and beta widened once for every row, into scratch 0 and 1.
  float* g32 = gamma ? ctx.scratch(0, size_t(cols)) : nullptr;
  float* b32 = beta ? ctx.scratch(1, size_t(cols)) : nullptr;
  for (int64_t c = 0; gamma && c < cols; ++c) g32[c] = to_f32(gamma[c]);
  for (int64_t c = 0; beta && c < cols; ++c) b32[c] = to_f32(beta[c]);
  parallel_for(p.rows, p.rows * cols > 16384, [&](int64_t r) {
    thread_local std::vector<float> row;
    if (row.size() < size_t(cols)) row.resize(size_t(cols));
    float* v = row.data();
    const T* xr = x + r * cols;
    if (res) {
      const T* rr = res + r * cols;
      for (int64_t c = 0; c < cols; ++c) {
        const T sum = from_f32<T>(to_f32(xr[c]) + to_f32(rr[c]));
        if (sum_out) sum_out[r * cols + c] = sum;
        v[c] = to_f32(sum);
      }
    } else {
      for (int64_t c = 0; c < cols; ++c) v[c] = to_f32(xr[c]);
      if (sum_out)
        for (int64_t c = 0; c < cols; ++c) sum_out[r * cols + c] = xr[c];
    }
    norm_row_f32(v, nullptr, g32, b32, v, nullptr, cols, p.kind == NormKind::Layer, p.eps);
    T* o = out + r * cols;
    if (after) {
      const T* a = after + r * cols;
      for (int64_t c = 0; c < cols; ++c) o[c] = from_f32<T>(to_f32(from_f32<T>(v[c])) + to_f32(a[c]));
    } else {
      for (int64_t c = 0; c < cols; ++c) o[c] = from_f32<T>(v[c]);
    }
  });
}

template <> void norm<float>(const NormParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const float* x = at<float>(arena, p.x);
  const float* res = p.residual == kNoBuffer ? nullptr : at<float>(arena, p.residual);
  const float* gamma = p.gamma == kNoBuffer ? nullptr : at<float>(arena, p.gamma);
  const float* beta = p.beta == kNoBuffer ? nullptr : at<float>(arena, p.beta);
  float* out = at<float>(arena, p.out);
  float* sum_out = p.sum_out == kNoBuffer ? nullptr : at<float>(arena, p.sum_out);
  const float* after = p.add_after == kNoBuffer ? nullptr : at<float>(arena, p.add_after);
  const int64_t cols = p.cols;
  parallel_for(p.rows, p.rows * cols > 16384, [&](int64_t r) {
    float* o = out + r * cols;
    norm_row_f32(x + r * cols, res ? res + r * cols : nullptr, gamma, beta, o, sum_out ? sum_out + r * cols : nullptr,
                 cols, p.kind == NormKind::Layer, p.eps);
    if (after)
      for (int64_t c = 0; c < cols; ++c) o[c] += after[r * cols + c];
  });
}

}  // namespace

void register_cpu_norm(CpuRegistry& r) {
  r.add<NormParams>(DType::F32, norm<float>);
  r.add<NormParams>(DType::F16, norm<Half>);
  r.add<NormParams>(DType::BF16, norm<BFloat>);
}

}  // namespace rlx::cpu
