// Token sampling (temperature, top-k, top-p) defined once for the host
// Sampler, the CPU sample kernel and the CUDA one, so that all three pick the
// same token for the same logits, seed and position (up to float rounding on
// a borderline draw). The definition, for a row of logits l and T > 0:
//  - NaN counts as -inf. A row whose largest value is not finite (all
//    -inf/NaN, or a +inf) gives the lowest index holding that value.
//  - u in [0, 1) is a hash of (seed, position): no generator state, so a
//    replayed graph draws a new u each step and a run repeats from its seed.
//  - Values are compared through sample_key (an order-preserving uint32).
//    top_k > 0 keeps the values >= the k-th largest (ties at it all kept).
//  - With p_i = exp((l_i - max) / T) over those, top_p < 1 then keeps the
//    values >= t, t the largest value with mass{l >= t} >= top_p * Z (the
//    most likely tokens whose mass first reaches top_p, ties at t kept).
//  - The token: walking the kept ones in ascending id order, the first
//    whose cumulative p exceeds u * (their total). The same distribution as
//    the sorted CDF, without a sort. Sums are in double.
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define RLX_HOST_DEVICE __host__ __device__
#else
#define RLX_HOST_DEVICE
#endif

namespace rlx {

// The splitmix64 finalizer: a bijection that mixes every bit.
RLX_HOST_DEVICE inline uint64_t sample_mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// u in [0, 1) for the token at `position`: 24 bits, exact in a float.
RLX_HOST_DEVICE inline float sample_uniform(uint64_t seed, int64_t position) {
  const uint64_t h = sample_mix(sample_mix(seed + 0x9E3779B97F4A7C15ull) ^ uint64_t(position));
  return float(h >> 40) * (1.f / 16777216.f);
}

// Order-preserving key of a float (NaN as -inf): a < b iff key(a) < key(b),
// except that -0 sorts below +0.
RLX_HOST_DEVICE inline uint32_t sample_key(float v) {
  if (v != v) v = -INFINITY;
  uint32_t b;
#if defined(__CUDA_ARCH__)
  b = __float_as_uint(v);
#else
  std::memcpy(&b, &v, 4);
#endif
  return (b & 0x80000000u) ? ~b : b | 0x80000000u;
}

// The unnormalised probability of logit v given the row's largest (finite) mx.
RLX_HOST_DEVICE inline float sample_weight(float v, float mx, float temperature) {
  return expf((v - mx) / temperature);  // NaN: (NaN - mx) -> NaN; callers pass clean values
}

RLX_HOST_DEVICE inline float sample_clean(float v) { return v != v ? -INFINITY : v; }

struct SampleSpec {
  float temperature = 1.f;  // > 0
  int32_t top_k = 0;        // 0: no limit
  float top_p = 1.f;        // in (0, 1]
};

// The token the definition above picks from x[0..n) for the uniform u: the
// reference every backend's kernel equals. Host only.
int32_t sample_row(const float* x, int64_t n, const SampleSpec& s, float u);

}  // namespace rlx
