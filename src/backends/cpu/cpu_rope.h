// Rotary position embedding of one row's heads, shared by the rope kernel and
// kv_write's fused rotation. Half-split (NeoX/HF) pairs dim d with
// d + n_rot/2; interleaved (GPT-J/GGUF) pairs 2i with 2i+1. Dims >= n_rot
// are copied.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "backends/cpu/cpu_storage.h"
#include "thunks/params.h"

namespace rlx::cpu {

// cos and sin of pairs [i0, i1) at `position` into c[0, i1 - i0) and
// s[...]: pair i's frequency theta^(-2i / n_rot), divided by freqs.div[i]
// when freqs.count > 0; cos and sin multiplied by freqs.scale.
inline void rope_angles(int64_t i0, int64_t i1, int64_t n_rot, float theta, double position,
                        const RopeFreqDivisors& freqs, float* c, float* s) {
  for (int64_t i = i0; i < i1; ++i) {
    // Angle in double: positions in the thousands lose phase in f32.
    const double div = freqs.count > 0 ? double(freqs.div[i]) : 1.0;
    const double angle = position * std::pow(double(theta), -2.0 * double(i) / double(n_rot)) / div;
    c[i - i0] = float(std::cos(angle) * freqs.scale);
    s[i - i0] = float(std::sin(angle) * freqs.scale);
  }
}

// Pairs [i0, i1) of one head rotated by rope_angles' c and s (indexed from i0).
template <class T>
void rope_pairs(const T* xh, T* oh, int64_t i0, int64_t i1, int64_t half, bool interleaved, const float* c,
                const float* s) {
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t d0 = interleaved ? 2 * i : i, d1 = interleaved ? 2 * i + 1 : i + half;
    const float a = to_f32(xh[d0]), b = to_f32(xh[d1]), cs = c[i - i0], sn = s[i - i0];
    oh[d0] = from_f32<T>(a * cs - b * sn);
    oh[d1] = from_f32<T>(b * cs + a * sn);
  }
}

// x and out hold `heads` heads of head_dim, one after another, every head at
// the same position: the angles are taken once for all heads.
template <class T>
void rope_row(const T* x, T* out, int64_t heads, int64_t head_dim, int64_t n_rot, bool interleaved, float theta,
              double position, const RopeFreqDivisors& freqs) {
  constexpr int64_t kChunk = 64;  // pairs whose angles are held at once
  const int64_t half = n_rot / 2;
  float c[kChunk], s[kChunk];
  for (int64_t i0 = 0; i0 < half; i0 += kChunk) {
    const int64_t i1 = std::min(half, i0 + kChunk);
    rope_angles(i0, i1, n_rot, theta, position, freqs, c, s);
    for (int64_t h = 0; h < heads; ++h) rope_pairs(x + h * head_dim, out + h * head_dim, i0, i1, half, interleaved, c, s);
  }
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t d = 2 * half; d < head_dim; ++d) out[h * head_dim + d] = x[h * head_dim + d];
}

// Each of `heads` heads RMS-normalized with gain gamma [head_dim] and
// rounded to T, as the norm kernel computes and stores it (RopeParams::gamma).
template <class T>
void head_rms_norm(const T* x, T* out, int64_t heads, int64_t head_dim, const T* gamma, float eps) {
  for (int64_t h = 0; h < heads; ++h) {
    const T* xh = x + h * head_dim;
    float sq = 0.f;
    for (int64_t d = 0; d < head_dim; ++d) sq += to_f32(xh[d]) * to_f32(xh[d]);
    const float inv = 1.f / std::sqrt(sq / float(head_dim) + eps);
    for (int64_t d = 0; d < head_dim; ++d) out[h * head_dim + d] = from_f32<T>(to_f32(xh[d]) * inv * to_f32(gamma[d]));
  }
}

}  // namespace rlx::cpu
