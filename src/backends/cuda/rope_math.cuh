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

// 1 / RMS of one head of head_dim (RopeParams::gamma: the head norm).
template <class T>
__device__ inline float head_inv_rms(const T* head, int head_dim, float eps) {
  float sq = 0.f;
  for (int d = 0; d < head_dim; ++d) sq = fmaf(to_f32(head[d]), to_f32(head[d]), sq);
  return rsqrtf(sq / float(head_dim) + eps);
}

// Element d of a head as the rotation reads it: as stored, or with a head
// norm (gamma non-null) normalized and rounded to T as a norm kernel stores it.
template <class T>
__device__ inline float head_element(const T* head, int d, const T* gamma, float inv_rms) {
  return gamma ? to_f32(from_f32<T>(to_f32(head[d]) * inv_rms * to_f32(gamma[d]))) : to_f32(head[d]);
}

// src and dst point at the head's first element; gamma and inv_rms as head_element.
template <class T>
__device__ inline void rope_pair(const T* src, T* dst, int j, int n_rot, bool interleaved, float theta,
                                 const RopeFreqDivisors& freqs, float position, const T* gamma = nullptr,
                                 float inv_rms = 1.f) {
  float sn, cs;
  rope_sincos(j, n_rot, theta, freqs, position, sn, cs);
  const int d0 = interleaved ? 2 * j : j, d1 = interleaved ? 2 * j + 1 : j + n_rot / 2;
  const float a = head_element(src, d0, gamma, inv_rms), b = head_element(src, d1, gamma, inv_rms);
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
