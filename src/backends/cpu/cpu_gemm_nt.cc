// Dot-product form: a 4 x 4 block of C keeps 16 vector partial sums over k in
// registers (16 FMAs per 8 loads), reduced across lanes once at the end. The
// loop over blocks of B's rows is outermost, so B is read from memory once
// and A is re-read from cache.
#include "backends/cpu/cpu_gemm_nt.h"

#include <cstring>

#include "backends/cpu/cpu_vec_math.h"

// Values of f32x16 never cross a call (the helpers are always inlined), so
// GCC's note that their calling convention differs by ISA does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

namespace rlx::cpu {
namespace {

using f32x16 = float __attribute__((vector_size(64)));
RLX_CPU_INLINE f32x16 load16(const float* p) {
  f32x16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
RLX_CPU_INLINE float lane_sum(f32x16 v) {
  float s = 0.f;
  for (int l = 0; l < 16; ++l) s += v[l];
  return s;
}

// Lane t of the result is the sum of v[t]'s 16 lanes: four levels that each
// add two vectors' halves (2 shuffles + 1 add per pair; 45 operations for 16
// sums where one lane-by-lane sum each would take 240 dependent adds).
RLX_CPU_INLINE f32x16 sum_lanes_of_16(const f32x16* v) {
  f32x16 l1[8], l2[4], l3[2];
  for (int p = 0; p < 8; ++p)  // [v(8) | w(8)]
    l1[p] = __builtin_shufflevector(v[2 * p], v[2 * p + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23) +
            __builtin_shufflevector(v[2 * p], v[2 * p + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25, 26, 27, 28, 29,
                                    30, 31);
  for (int p = 0; p < 4; ++p)  // 4 lanes each of 4 sums
    l2[p] = __builtin_shufflevector(l1[2 * p], l1[2 * p + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18, 19, 24, 25, 26,
                                    27) +
            __builtin_shufflevector(l1[2 * p], l1[2 * p + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22, 23, 28, 29, 30,
                                    31);
  for (int p = 0; p < 2; ++p)  // 2 lanes each of 8 sums
    l3[p] = __builtin_shufflevector(l2[2 * p], l2[2 * p + 1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24, 25, 28,
                                    29) +
            __builtin_shufflevector(l2[2 * p], l2[2 * p + 1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26, 27, 30,
                                    31);
  return __builtin_shufflevector(l3[0], l3[1], 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30) +
         __builtin_shufflevector(l3[0], l3[1], 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
}

// R x C block of C at (a, b); k16 = k rounded down to 16, the rest scalar.
template <int R, int C>
RLX_CPU_INLINE void block(int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                          int64_t ldc) {
  f32x16 acc[R][C] = {};
  const int64_t k16 = k / 16 * 16;
  for (int64_t x = 0; x < k16; x += 16) {
    f32x16 bv[C];
    for (int j = 0; j < C; ++j) bv[j] = load16(b + j * ldb + x);
    for (int i = 0; i < R; ++i) {
      const f32x16 av = load16(a + i * lda + x);
      for (int j = 0; j < C; ++j) acc[i][j] += av * bv[j];
    }
  }
  if constexpr (R == 4 && C == 4) {
    const f32x16 sums = sum_lanes_of_16(&acc[0][0]);
    for (int i = 0; i < R; ++i)
      for (int j = 0; j < C; ++j) {
        float s = sums[i * C + j];
        for (int64_t x = k16; x < k; ++x) s += a[i * lda + x] * b[j * ldb + x];
        c[i * ldc + j] = s;
      }
    return;
  }
  for (int i = 0; i < R; ++i)
    for (int j = 0; j < C; ++j) {
      float s = lane_sum(acc[i][j]);
      for (int64_t x = k16; x < k; ++x) s += a[i * lda + x] * b[j * ldb + x];
      c[i * ldc + j] = s;
    }
}

template <int C>
RLX_CPU_INLINE void column_block(int64_t m, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                                 float* c, int64_t ldc) {
  int64_t i = 0;
  for (; i + 4 <= m; i += 4) block<4, C>(k, a + i * lda, lda, b, ldb, c + i * ldc, ldc);
  for (; i < m; ++i) block<1, C>(k, a + i * lda, lda, b, ldb, c + i * ldc, ldc);
}

}  // namespace

RLX_CPU_CLONES void gemm_nt_unpacked(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b,
                                     int64_t ldb, float* c, int64_t ldc) {
  int64_t j = 0;
  for (; j + 4 <= n; j += 4) column_block<4>(m, k, a, lda, b + j * ldb, ldb, c + j, ldc);
  for (; j < n; ++j) column_block<1>(m, k, a, lda, b + j * ldb, ldb, c + j, ldc);
}

}  // namespace rlx::cpu
