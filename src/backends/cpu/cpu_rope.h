// Rotary position embedding of one row's heads, shared by the rope kernel and
// kv_write's fused rotation. Half-split (NeoX/HF) pairs dim d with
// d + n_rot/2; interleaved (GPT-J/GGUF) pairs 2i with 2i+1. Dims >= n_rot
// are copied.
#pragma once
#include <cmath>
#include <cstdint>

#include "backends/cpu/cpu_storage.h"
#include "thunks/params.h"

namespace rlx::cpu {

// x and out hold `heads` heads of head_dim, one after another; pair i's
// frequency is divided by freqs.div[i] when freqs.count > 0; cos and sin are
// multiplied by freqs.scale.
template <class T>
void rope_row(const T* x, T* out, int64_t heads, int64_t head_dim, int64_t n_rot, bool interleaved, float theta,
              double position, const RopeFreqDivisors& freqs) {
  const int64_t half = n_rot / 2;
  for (int64_t h = 0; h < heads; ++h) {
    const T* xh = x + h * head_dim;
    T* oh = out + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      // Angle in double: positions in the thousands lose phase in f32.
      const double div = freqs.count > 0 ? double(freqs.div[i]) : 1.0;
      const double angle = position * std::pow(double(theta), -2.0 * double(i) / double(n_rot)) / div;
      const float c = float(std::cos(angle) * freqs.scale), sn = float(std::sin(angle) * freqs.scale);
      const int64_t d0 = interleaved ? 2 * i : i, d1 = interleaved ? 2 * i + 1 : i + half;
      const float a = to_f32(xh[d0]), b = to_f32(xh[d1]);
      oh[d0] = from_f32<T>(a * c - b * sn);
      oh[d1] = from_f32<T>(b * c + a * sn);
    }
    for (int64_t d = 2 * half; d < head_dim; ++d) oh[d] = xh[d];
  }
}

}  // namespace rlx::cpu
