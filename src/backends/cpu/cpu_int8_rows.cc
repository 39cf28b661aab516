#include "backends/cpu/cpu_int8_rows.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_storage.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RLX_INT8_ROWS_X86 1
#endif

namespace rlx::cpu {
namespace {

#ifdef RLX_INT8_ROWS_X86
#define RLX_AVX512BW __attribute__((target("avx512f,avx512bw,avx512vl")))

// 16 values of a row (the first `m`'s lanes) in f32.
RLX_AVX512BW inline __attribute__((always_inline)) __m512 load16(const float* x, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, x);
}
RLX_AVX512BW inline __attribute__((always_inline)) __m512 load16(const BFloat* x, __mmask16 m) {
  return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, x)), 16));
}

// One row: its min and max, then u8 = round(x * inv) + zero (nearest
// even, as the scalar form's nearbyint), clamped; the padding the zero point.
template <class T>
RLX_AVX512BW void quantize_row(const T* x, int64_t k, int64_t ld, uint8_t* q, float* scale, int32_t* zero) {
  __m512 lo = _mm512_setzero_ps(), hi = _mm512_setzero_ps();
  for (int64_t j = 0; j < k; j += 16) {
    const __mmask16 m = k - j >= 16 ? __mmask16(0xffff) : __mmask16((1u << (k - j)) - 1);
    const __m512 v = load16(x + j, m);  // masked lanes are 0, inside [lo, hi] already
    lo = _mm512_min_ps(lo, v), hi = _mm512_max_ps(hi, v);
  }
  const Int8RowRange r = int8_row_range(_mm512_reduce_min_ps(lo), _mm512_reduce_max_ps(hi));
  *scale = r.scale, *zero = r.zero;
  const __m512 inv = _mm512_set1_ps(r.inv);
  const __m512i z = _mm512_set1_epi32(r.zero), top = _mm512_set1_epi32(255), none = _mm512_setzero_si512();
  for (int64_t j = 0; j < ld; j += 16) {
    const int64_t left = ld - j;
    const __mmask16 st = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    const __mmask16 m = k - j >= 16 ? __mmask16(0xffff) : k - j <= 0 ? __mmask16(0) : __mmask16((1u << (k - j)) - 1);
    __m512i v = _mm512_add_epi32(_mm512_cvtps_epi32(_mm512_mul_ps(load16(x + j, m), inv)), z);
    v = _mm512_min_epi32(_mm512_max_epi32(v, none), top);
    _mm512_mask_cvtepi32_storeu_epi8(q + j, st, v);
  }
}
#endif

// The scalar form (no AVX-512 or f16 rows): the same values.
template <class T>
void quantize_row_scalar(const T* x, int64_t k, int64_t ld, uint8_t* q, float* scale, int32_t* zero) {
  float lo = 0.f, hi = 0.f;
  for (int64_t j = 0; j < k; ++j) lo = std::min(lo, to_f32(x[j])), hi = std::max(hi, to_f32(x[j]));
  const Int8RowRange r = int8_row_range(lo, hi);
  *scale = r.scale, *zero = r.zero;
  for (int64_t j = 0; j < k; ++j)
    q[j] = uint8_t(std::clamp(int32_t(std::nearbyint(to_f32(x[j]) * r.inv)) + r.zero, 0, 255));
  for (int64_t j = k; j < ld; ++j) q[j] = uint8_t(r.zero);
}

bool avx512bw() {
#ifdef RLX_INT8_ROWS_X86
  static const bool ok = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                         __builtin_cpu_supports("avx512vl");
  return ok;
#else
  return false;
#endif
}

}  // namespace

template <class T>
void quantize_rows_int8(const T* a, int64_t m, int64_t k, int64_t lda, uint8_t* q, float* scales, int32_t* zeros,
                        int threads) {
  const int64_t ld = int8_row_bytes(k);
  const bool vector = avx512bw();
  parallel_ranges(m, m * k > 65536 ? threads : 1, [&](int64_t lo, int64_t hi, int) {
    for (int64_t i = lo; i < hi; ++i) {
#ifdef RLX_INT8_ROWS_X86
      if constexpr (!std::is_same_v<T, Half>)
        if (vector) {
          quantize_row(a + i * lda, k, ld, q + i * ld, scales + i, zeros + i);
          continue;
        }
#endif
      quantize_row_scalar(a + i * lda, k, ld, q + i * ld, scales + i, zeros + i);
    }
  });
  (void)vector;
}

template void quantize_rows_int8<float>(const float*, int64_t, int64_t, int64_t, uint8_t*, float*, int32_t*, int);
template void quantize_rows_int8<Half>(const Half*, int64_t, int64_t, int64_t, uint8_t*, float*, int32_t*, int);
template void quantize_rows_int8<BFloat>(const BFloat*, int64_t, int64_t, int64_t, uint8_t*, float*, int32_t*, int);

}  // namespace rlx::cpu
