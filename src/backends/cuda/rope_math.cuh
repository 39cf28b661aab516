// One rotary pair of one head, shared by the rope kernel and kv_write's
// fused rotation so that both round alike. Half-split (NeoX/HF) pairs dim j
// with j + n_rot/2; interleaved (GPT-J/GGUF) pairs 2j with 2j+1.
#pragma once
#include "backends/cuda/device_types.cuh"

namespace rlx::cuda {

// src and dst point at the head's first element.
template <class T>
__device__ inline void rope_pair(const T* src, T* dst, int j, int n_rot, bool interleaved, float theta,
                                 float position) {
  const float inv_freq = powf(theta, -2.f * float(j) / float(n_rot));
  float sn, cs;
  sincosf(position * inv_freq, &sn, &cs);
  const int d0 = interleaved ? 2 * j : j, d1 = interleaved ? 2 * j + 1 : j + n_rot / 2;
  const float a = to_f32(src[d0]), b = to_f32(src[d1]);
  dst[d0] = from_f32<T>(a * cs - b * sn);
  dst[d1] = from_f32<T>(b * cs + a * sn);
}

}  // namespace rlx::cuda
