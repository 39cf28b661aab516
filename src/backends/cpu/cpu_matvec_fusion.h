// What the CPU products share for their fused RMSNorm (MatVecFusionParams):
// x's rows widened to f32 and, where the product normalizes them, scaled by
// rsqrt(mean(x^2) + eps) and gamma, as the CUDA matrix-vector kernels apply it
// (in f32, not rounded to the dtype between norm and product). f32 rows go
// through the norm thunk's own row function, so fused and apart agree bit
// for bit.
#pragma once
#include <algorithm>
#include <cmath>
#include <type_traits>

#include "backends/cpu/cpu_activation.h"
#include "backends/cpu/cpu_norm_row.h"
#include "backends/cpu/cpu_storage.h"
#include "thunks/params.h"

namespace rlx::cpu {

// m rows of k elements (row length ld) of x into dst [m, k] (f32, dense).
template <class T>
void product_rows_f32(const T* x, int64_t m, int64_t k, int64_t ld, const MatVecFusionParams& f,
                      uint8_t* arena, float* dst) {
  const T* gamma = f.norm_gamma == kNoBuffer ? nullptr : at<const T>(arena, f.norm_gamma);
  if constexpr (std::is_same_v<T, float>) {
    for (int64_t i = 0; i < m; ++i) {
      if (gamma) norm_row_f32(x + i * ld, nullptr, gamma, nullptr, dst + i * k, nullptr, k, false, f.norm_eps);
      else std::copy(x + i * ld, x + i * ld + k, dst + i * k);
    }
    return;
  }
  for (int64_t i = 0; i < m; ++i) {
    float ss = 0.f;
    for (int64_t j = 0; j < k; ++j) {
      const float v = to_f32(x[i * ld + j]);
      dst[i * k + j] = v;
      ss += v * v;
    }
    if (!gamma) continue;
    const float s = 1.f / std::sqrt(ss / float(k) + f.norm_eps);
    for (int64_t j = 0; j < k; ++j) dst[i * k + j] *= s * to_f32(gamma[j]);
  }
}

// The gate of a product fused with the SwiGLU/GeGLU after it (fused.glu):
// out [m, n / 2] (row length ldo) = glu(c_gate + bias) * (c_up + bias) from
// the product's f32 result c [m, n] (row length ldc), bias [n] or null.
template <class T>
void glu_rows(Activation glu, const float* c, int64_t m, int64_t n, int64_t ldc, const T* bias, T* out,
              int64_t ldo) {
  const int64_t h = n / 2;
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < h; ++j) {
      const float g = c[i * ldc + j] + (bias ? to_f32(bias[j]) : 0.f);
      const float u = c[i * ldc + h + j] + (bias ? to_f32(bias[h + j]) : 0.f);
      out[i * ldo + j] = from_f32<T>(apply_activation(glu, g) * u);
    }
}

}  // namespace rlx::cpu
