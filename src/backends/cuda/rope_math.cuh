// One rotary pair of one head, shared by the rope kernel and kv_write's
// fused rotation so that both round alike. Half-split (NeoX/HF) pairs dim j
// with j + n_rot/2; interleaved (GPT-J/GGUF) pairs 2j with 2j+1.
#pragma once
#include "backends/cuda/device_types.cuh"
#include "thunks/params.h"

namespace rlx::cuda {

// The sine and cosine of pair j at `position` (its frequency divided by
// freqs.div[j] where freqs.count > 0), times freqs.scale.
__device__ inline void rope_sincos(int j, int n_rot, float theta, const RopeFreqDivisors& freqs, float position,
                                   float& sn, float& cs) {
  float inv_freq = powf(theta, -2.f * float(j) / float(n_rot));
  if (freqs.count > 0) inv_freq /= freqs.div[j];
  sincosf(position * inv_freq, &sn, &cs);
  sn *= freqs.scale;
  cs *= freqs.scale;
}

// src and dst point at the head's first element.
template <class T>
__device__ inline void rope_pair(const T* src, T* dst, int j, int n_rot, bool interleaved, float theta,
                                 const RopeFreqDivisors& freqs, float position) {
  float sn, cs;
  rope_sincos(j, n_rot, theta, freqs, position, sn, cs);
  const int d0 = interleaved ? 2 * j : j, d1 = interleaved ? 2 * j + 1 : j + n_rot / 2;
  const float a = to_f32(src[d0]), b = to_f32(src[d1]);
  dst[d0] = from_f32<T>(a * cs - b * sn);
  dst[d1] = from_f32<T>(b * cs + a * sn);
}

// Element d (< n_rot) of a head after rotation, rounded to T as rope_pair
// stores it.
template <class T>
__device__ inline T rope_element(const T* head, int d, int n_rot, bool interleaved, float theta,
                                  const RopeFreqDivisors& freqs, float position) {
  const int half = n_rot / 2;
  const bool first = interleaved ? d % 2 == 0 : d < half;
  const int j = interleaved ? d / 2 : (first ? d : d - half);
  const int d0 = interleaved ? 2 * j : j, d1 = interleaved ? 2 * j + 1 : j + half;
  float sn, cs;
  rope_sincos(j, n_rot, theta, freqs, position, sn, cs);
  const float a = to_f32(head[d0]), b = to_f32(head[d1]);
  return from_f32<T>(first ? a * cs - b * sn : b * cs + a * sn);
}

}  // namespace rlx::cuda
