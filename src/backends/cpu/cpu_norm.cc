// LayerNorm / RMSNorm over the last axis, optionally fused with a residual
// add whose sum is also written out (sum_out).
#include <cmath>

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

template <class T> void norm(const NormParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const T* x = at<T>(arena, p.x);
  const T* res = p.residual == kNoBuffer ? nullptr : at<T>(arena, p.residual);
  const T* gamma = p.gamma == kNoBuffer ? nullptr : at<T>(arena, p.gamma);
  const T* beta = p.beta == kNoBuffer ? nullptr : at<T>(arena, p.beta);
  T* out = at<T>(arena, p.out);
  T* sum_out = p.sum_out == kNoBuffer ? nullptr : at<T>(arena, p.sum_out);
  const int64_t cols = p.cols;
  parallel_for(p.rows, p.rows * cols > 16384, [&](int64_t r) {
    const T* xr = x + r * cols;
    const T* rr = res ? res + r * cols : nullptr;
    // The normalized input is the sum as stored, so fused == add then norm.
    auto value = [&](int64_t c) {
      return rr ? to_f32(from_f32<T>(to_f32(xr[c]) + to_f32(rr[c]))) : to_f32(xr[c]);
    };
    if (sum_out)
      for (int64_t c = 0; c < cols; ++c) sum_out[r * cols + c] = from_f32<T>(value(c));
    double mean = 0.0;
    if (p.kind == NormKind::Layer) {
      for (int64_t c = 0; c < cols; ++c) mean += value(c);
      mean /= double(cols);
    }
    double sq = 0.0;
    for (int64_t c = 0; c < cols; ++c) {
      double d = value(c) - mean;
      sq += d * d;
    }
    const float inv = float(1.0 / std::sqrt(sq / double(cols) + double(p.eps)));
    const float m = float(mean);
    for (int64_t c = 0; c < cols; ++c) {
      float v = (value(c) - m) * inv;
      if (gamma) v *= to_f32(gamma[c]);
      if (beta) v += to_f32(beta[c]);
      out[r * cols + c] = from_f32<T>(v);
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
  const int64_t cols = p.cols;
  parallel_for(p.rows, p.rows * cols > 16384, [&](int64_t r) {
    norm_row_f32(x + r * cols, res ? res + r * cols : nullptr, gamma, beta, out + r * cols,
                 sum_out ? sum_out + r * cols : nullptr, cols, p.kind == NormKind::Layer, p.eps);
  });
}

}  // namespace

void register_cpu_norm(CpuRegistry& r) {
  r.add<NormParams>(DType::F32, norm<float>);
  r.add<NormParams>(DType::F16, norm<Half>);
  r.add<NormParams>(DType::BF16, norm<BFloat>);
}

}  // namespace rlx::cpu
