// The sum of a 16-lane f32 vector's lanes, in one fixed order, for one
// vector or for up to 16 at once (lanes shuffled across vectors, the same
// additions on the same operands). matmul_q's one-row kernel and its
// many-row tiles (cpu_quant_gemm.cc) both end with it, so a row's result is
// the same bits whichever ran. The order is GCC's _mm512_reduce_add_ps:
// lanes j + 8 and j, then j + 4 and j, then j and j + 2, then 0 and 1 (the
// first operand first: a NaN's payload is the first operand's).
#pragma once
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#define RLX_TARGET_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c,fma")))

namespace rlx::cpu {

RLX_TARGET_AVX512 inline __attribute__((always_inline)) float reduce_lanes(__m512 v) {
  const __m256 t3 = _mm256_add_ps(_mm512_extractf32x8_ps(v, 1), _mm512_castps512_ps256(v));
  const __m128 t6 = _mm_add_ps(_mm256_extractf128_ps(t3, 1), _mm256_castps256_ps128(t3));
  const __m128 t8 = _mm_add_ps(t6, _mm_shuffle_ps(t6, t6, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtss_f32(_mm_add_ss(t8, _mm_movehdup_ps(t8)));
}

// out[j] = reduce_lanes(v[j]) for j < N (N <= 16), four shuffle levels over
// all N vectors at once instead of N reductions.
template <int N>
RLX_TARGET_AVX512 inline __attribute__((always_inline)) void reduce_lanes_n(const __m512* v, float* out) {
  static_assert(N >= 1 && N <= 16);
  const __m512 zero = _mm512_setzero_ps();
  __m512 c[8], e[4], g[2];
  // Level 1: c[j] holds v[2j]'s lanes j + 8 plus j, then v[2j + 1]'s.
#pragma GCC unroll 8
  for (int j = 0; j < 8; ++j) {
    if (2 * j >= N) {
      c[j] = zero;
      continue;
    }
    const __m512 a = v[2 * j], b = 2 * j + 1 < N ? v[2 * j + 1] : zero;
    c[j] = _mm512_add_ps(_mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(3, 2, 3, 2)),
                         _mm512_shuffle_f32x4(a, b, _MM_SHUFFLE(1, 0, 1, 0)));
  }
  // Level 2: quarter q of e[k] is v[4k + q]'s lanes j + 4 plus j.
#pragma GCC unroll 4
  for (int k = 0; k < 4; ++k) {
    if (4 * k >= N) {
      e[k] = zero;
      continue;
    }
    e[k] = _mm512_add_ps(_mm512_shuffle_f32x4(c[2 * k], c[2 * k + 1], _MM_SHUFFLE(3, 1, 3, 1)),
                         _mm512_shuffle_f32x4(c[2 * k], c[2 * k + 1], _MM_SHUFFLE(2, 0, 2, 0)));
  }
  // Level 3: in quarter q of g[l], lanes 0-1 are v[8l + q]'s j plus j + 2, lanes 2-3 v[8l + 4 + q]'s.
#pragma GCC unroll 2
  for (int l = 0; l < 2; ++l) {
    if (8 * l >= N) {
      g[l] = zero;
      continue;
    }
    g[l] = _mm512_add_ps(_mm512_shuffle_ps(e[2 * l], e[2 * l + 1], _MM_SHUFFLE(1, 0, 1, 0)),
                         _mm512_shuffle_ps(e[2 * l], e[2 * l + 1], _MM_SHUFFLE(3, 2, 3, 2)));
  }
  // Level 4: lane 4q + s is v[4s + q]'s sum.
  const __m512 r = _mm512_add_ps(_mm512_shuffle_ps(g[0], g[1], _MM_SHUFFLE(2, 0, 2, 0)),
                                 _mm512_shuffle_ps(g[0], g[1], _MM_SHUFFLE(3, 1, 3, 1)));
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, r);
#pragma GCC unroll 16
  for (int j = 0; j < N; ++j) out[j] = lanes[(j % 4) * 4 + j / 4];
}

}  // namespace rlx::cpu

#endif
