#include "backends/cpu/cpu_gemm_packed.h"
#include "backends/cpu/cpu_gemm.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include <cstdlib>
#include <cmath>
#include <cstring>
#include <string_view>

#include "backends/cpu/cpu_activation.h"
#include "backends/cpu/cpu_parallel.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define RLX_PACKED_GEMM 1
#endif

namespace rlx::cpu {
namespace {

constexpr int64_t NR = kPackedNR, MR = kPackedMR;
// k block: one panel block (NR x kc) is 48 KB, in L2 beside A's block. 128,
// 192, 256 and 384 measured alike at MiniLM's and BERT's shapes; 384 keeps
// MiniLM's k = 384 in one block.
constexpr int64_t kMaxKC = 384;
// Rows of C per block (A's part: 144 x 384 floats, 216 KB, in L2). A group's
// panels come from memory for its first block of rows and from L2 for the
// next; up to 144 rows read each weight once.
constexpr int64_t kMC = 12 * MR;

// bf16 pairs: a panel block of twice the k in the same 48 KB.
constexpr int64_t kMaxKCPairs = 2 * kMaxKC;
// int8 quads: four times the k in the same 48 KB (MiniLM's and BERT-base's
// FFN down, k = 1536 and 3072, in one and two blocks).
constexpr int64_t kMaxKCQuads = 4 * kMaxKC;

// Equal k blocks of at most max_kc, each a multiple of `step` (the k a word
// of the packed panel holds): the block boundaries depend on k alone, so the
// order of every sum does too.
int64_t k_block(int64_t k, int64_t max_kc, int64_t step) {
  const int64_t blocks = (k + max_kc - 1) / max_kc;
  if (blocks == 0) return 0;
  const int64_t kc = (k + blocks - 1) / blocks;
  return (kc + step - 1) / step * step;
}

#ifdef RLX_PACKED_GEMM
#define RLX_AVX512 __attribute__((target("avx512f")))

// The R x NR tile's sums into C: its first `cols` columns, added to C's old
// values when `accumulate` (a later k block).
template <int R>
RLX_AVX512 inline __attribute__((always_inline)) void store_tile(__m512 (&acc0)[R], __m512 (&acc1)[R], float* c,
                                                                 int64_t ldc, int64_t cols, bool accumulate) {
  const int64_t rest = cols - 16;
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = rest >= 16 ? __mmask16(0xffff) : rest <= 0 ? __mmask16(0) : __mmask16((1u << rest) - 1);
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    float* row = c + r * ldc;
    if (accumulate) {
      acc0[r] = _mm512_add_ps(_mm512_maskz_loadu_ps(m0, row), acc0[r]);
      acc1[r] = _mm512_add_ps(_mm512_maskz_loadu_ps(m1, row + 16), acc1[r]);
    }
    _mm512_mask_storeu_ps(row, m0, acc0[r]);
    _mm512_mask_storeu_ps(row + 16, m1, acc1[r]);
  }
}

// One R x NR tile of C over kc steps of k: element kk of R rows of A
// (a[r * lda + kk]) broadcast against two vectors of the B panel block, 2R
// accumulators in registers. Stores the first `cols` columns, adding C's old
// values when `accumulate` (a later k block). When `next` is set, also
// prefetches that many floats' worth of the next panel block into L2: weights
// come from memory on every run, and the first tile of a panel would
// otherwise wait on each line of it.
template <int R>
RLX_AVX512 void tile(int64_t kc, const float* a, int64_t lda, const float* bp, float* c, int64_t ldc, int64_t cols,
                     bool accumulate, const float* next) {
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t kk = 0; kk < kc; ++kk) {
    if (next) {
      _mm_prefetch(reinterpret_cast<const char*>(next + kk * NR), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(next + kk * NR + 16), _MM_HINT_T1);
    }
    const __m512 b0 = _mm512_load_ps(bp + kk * NR), b1 = _mm512_load_ps(bp + kk * NR + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const __m512 av = _mm512_set1_ps(a[r * lda + kk]);
      acc0[r] = _mm512_fmadd_ps(av, b0, acc0[r]);
      acc1[r] = _mm512_fmadd_ps(av, b1, acc1[r]);
    }
  }
  store_tile<R>(acc0, acc1, c, ldc, cols, accumulate);
}

using TileFn = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, int64_t, bool, const float*);
template <int... R> constexpr auto tiles(std::integer_sequence<int, R...>) {
  return std::array<TileFn, sizeof...(R)>{&tile<R + 1>...};
}
constexpr auto kTiles = tiles(std::make_integer_sequence<int, int(MR)>{});

// The bf16 tile: each 32-bit word of the panel holds one column's two
// consecutive k (low half first), and VDPBF16PS adds both products of a word
// pair into an f32 lane, so a step covers two k for the same loads and
// instructions. A's two bf16 at kk, kk + 1 are one word as they lie in the
// row; an odd kc's last k is paired with zero, as the panel's is.
#define RLX_AVX512_BF16 __attribute__((target("avx512f,avx512bf16")))
inline uint32_t a_pair(const BFloat* p) {
  uint32_t w;
  std::memcpy(&w, p, sizeof w);
  return w;
}
template <int R>
RLX_AVX512_BF16 void tile_bf16(int64_t kc, const BFloat* a, int64_t lda, const uint32_t* bp, float* c, int64_t ldc,
                               int64_t cols, bool accumulate, const uint32_t* next) {
  __m512 acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  const int64_t pairs = (kc + 1) / 2;
  const bool odd = kc % 2 != 0;
  for (int64_t kp = 0; kp < pairs; ++kp) {
    if (next) {
      _mm_prefetch(reinterpret_cast<const char*>(next + kp * NR), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(next + kp * NR + 16), _MM_HINT_T1);
    }
    const __m512bh b0 = (__m512bh)_mm512_load_si512(bp + kp * NR);
    const __m512bh b1 = (__m512bh)_mm512_load_si512(bp + kp * NR + 16);
    const bool half = odd && kp + 1 == pairs;
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const BFloat* ak = a + r * lda + 2 * kp;
      const __m512bh av = (__m512bh)_mm512_set1_epi32(int(half ? uint32_t(ak->bits) : a_pair(ak)));
      acc0[r] = _mm512_dpbf16_ps(acc0[r], av, b0);
      acc1[r] = _mm512_dpbf16_ps(acc1[r], av, b1);
    }
  }
  store_tile<R>(acc0, acc1, c, ldc, cols, accumulate);
}

using TileBf16Fn = void (*)(int64_t, const BFloat*, int64_t, const uint32_t*, float*, int64_t, int64_t, bool,
                            const uint32_t*);
template <int... R> constexpr auto tiles_bf16(std::integer_sequence<int, R...>) {
  return std::array<TileBf16Fn, sizeof...(R)>{&tile_bf16<R + 1>...};
}
constexpr auto kTilesBf16 = tiles_bf16(std::make_integer_sequence<int, int(MR)>{});

// out[j] = bf16(row[j] + residual[j]) (residual may be null), 16 at a time
// with VCVTNEPS2BF16 (round to nearest even, as float_to_bf16).
__attribute__((target("avx512f,avx512bf16,avx512bw,avx512vl"))) void narrow_row_bf16(const float* row,
                                                                                       const BFloat* residual,
                                                                                       BFloat* out, int64_t cols) {
  for (int64_t j = 0; j < cols; j += 16) {
    const int64_t left = cols - j;
    const __mmask16 m = left >= 16 ? __mmask16(0xffff) : __mmask16((1u << left) - 1);
    __m512 v = _mm512_maskz_loadu_ps(m, row + j);
    if (residual) {
      const __m512i r16 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m, residual + j));
      v = _mm512_add_ps(v, _mm512_castsi512_ps(_mm512_slli_epi32(r16, 16)));
    }
    _mm256_mask_storeu_epi16(out + j, m, (__m256i)_mm512_cvtneps_pbh(v));
  }
}

// What the int8 tile's last k block does in registers, so that the i32
// sums never go through memory: dequantize (scale_a[i] * scale_b[j] *
// (sum - zero_a[i] * sums[j])), add the bias, and then either store f32 into C (for an
// activation or an f32 result) or, with `out` set, add the residual and
// store bf16 there (no activation; needs AVX512-BF16).
struct Int8Epilogue {
  const float* scale_a = nullptr;  // per row of A
  const int32_t* zero_a = nullptr;  // per row of A: the u8 that stands for 0
  const float* scale_b = nullptr;  // per column of B
  const int32_t* sums = nullptr;   // per column: the sum of its int8 values
  const float* bias = nullptr;
  BFloat* out = nullptr;
  const BFloat* residual = nullptr;
  int64_t ld = 0;
};

// The int8 tile: each 32-bit word of the panel holds one column's four
// consecutive k as int8, A's four u8 at kk..kk + 3 are one word as they lie
// in the row, and VPDPBUSD adds the four u8 x s8 products into an i32 lane:
// a step covers four k for the loads and instructions of the bf16 tile's
// two. The sums are exact, so an earlier k block stores them as i32 bits in
// C and the next adds them back; the last block (`e` set) applies the
// epilogue above. A row is padded to a multiple of 4 (its bytes past k meet
// the panel's zero weights). Rows i.., columns j0.. of C: for the epilogue.
#define RLX_AVX512_VNNI __attribute__((target("avx512f,avx512vnni,avx512bw,avx512vl,avx512bf16")))
template <int R>
RLX_AVX512_VNNI void tile_int8(int64_t kc, const uint8_t* a, int64_t lda, const uint32_t* bp, float* c, int64_t ldc,
                               int64_t cols, bool accumulate, const uint32_t* next, const Int8Epilogue* e,
                               int64_t i, int64_t j0) {
  __m512i acc0[R], acc1[R];
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_si512();
  const int64_t quads = (kc + 3) / 4;
  for (int64_t kq = 0; kq < quads; ++kq) {
    if (next) {
      _mm_prefetch(reinterpret_cast<const char*>(next + kq * NR), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(next + kq * NR + 16), _MM_HINT_T1);
    }
    const __m512i b0 = _mm512_load_si512(bp + kq * NR), b1 = _mm512_load_si512(bp + kq * NR + 16);
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      uint32_t w;
      std::memcpy(&w, a + r * lda + 4 * kq, sizeof w);
      const __m512i av = _mm512_set1_epi32(int(w));
      acc0[r] = _mm512_dpbusd_epi32(acc0[r], av, b0);
      acc1[r] = _mm512_dpbusd_epi32(acc1[r], av, b1);
    }
  }
  const int64_t rest = cols - 16;
  const __mmask16 m0 = cols >= 16 ? __mmask16(0xffff) : __mmask16((1u << cols) - 1);
  const __mmask16 m1 = rest >= 16 ? __mmask16(0xffff) : rest <= 0 ? __mmask16(0) : __mmask16((1u << rest) - 1);
  if (accumulate)
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      const auto* row = reinterpret_cast<const int32_t*>(c + r * ldc);
      acc0[r] = _mm512_add_epi32(_mm512_maskz_loadu_epi32(m0, row), acc0[r]);
      acc1[r] = _mm512_add_epi32(_mm512_maskz_loadu_epi32(m1, row + 16), acc1[r]);
    }
  if (!e) {
#pragma GCC unroll 16
    for (int r = 0; r < R; ++r) {
      auto* row = reinterpret_cast<int32_t*>(c + r * ldc);
      _mm512_mask_storeu_epi32(row, m0, acc0[r]);
      _mm512_mask_storeu_epi32(row + 16, m1, acc1[r]);
    }
    return;
  }
  const __m512 sb0 = _mm512_maskz_loadu_ps(m0, e->scale_b + j0), sb1 = _mm512_maskz_loadu_ps(m1, e->scale_b + j0 + 16);
  const __m512i o0 = _mm512_maskz_loadu_epi32(m0, e->sums + j0), o1 = _mm512_maskz_loadu_epi32(m1, e->sums + j0 + 16);
  const __m512 bias0 = e->bias ? _mm512_maskz_loadu_ps(m0, e->bias + j0) : _mm512_setzero_ps();
  const __m512 bias1 = e->bias ? _mm512_maskz_loadu_ps(m1, e->bias + j0 + 16) : _mm512_setzero_ps();
#pragma GCC unroll 16
  for (int r = 0; r < R; ++r) {
    const __m512 sa = _mm512_set1_ps(e->scale_a[i + r]);
    const __m512i za = _mm512_set1_epi32(e->zero_a[i + r]);
    const __m512i d0 = _mm512_sub_epi32(acc0[r], _mm512_mullo_epi32(za, o0));
    const __m512i d1 = _mm512_sub_epi32(acc1[r], _mm512_mullo_epi32(za, o1));
    const __m512 v0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d0), _mm512_mul_ps(sa, sb0), bias0);
    const __m512 v1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d1), _mm512_mul_ps(sa, sb1), bias1);
    if (e->out) {
      BFloat* o = e->out + (i + r) * e->ld + j0;
      __m512 w0 = v0, w1 = v1;
      if (e->residual) {
        const BFloat* res = e->residual + (i + r) * e->ld + j0;
        const __m512i r0 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m0, res));
        const __m512i r1 = _mm512_cvtepu16_epi32(_mm256_maskz_loadu_epi16(m1, res + 16));
        w0 = _mm512_add_ps(w0, _mm512_castsi512_ps(_mm512_slli_epi32(r0, 16)));
        w1 = _mm512_add_ps(w1, _mm512_castsi512_ps(_mm512_slli_epi32(r1, 16)));
      }
      _mm256_mask_storeu_epi16(o, m0, (__m256i)_mm512_cvtneps_pbh(w0));
      _mm256_mask_storeu_epi16(o + 16, m1, (__m256i)_mm512_cvtneps_pbh(w1));
    } else {
      _mm512_mask_storeu_ps(c + r * ldc, m0, v0);
      _mm512_mask_storeu_ps(c + r * ldc + 16, m1, v1);
    }
  }
}

using TileInt8Fn = void (*)(int64_t, const uint8_t*, int64_t, const uint32_t*, float*, int64_t, int64_t, bool,
                            const uint32_t*, const Int8Epilogue*, int64_t, int64_t);
template <int... R> constexpr auto tiles_int8(std::integer_sequence<int, R...>) {
  return std::array<TileInt8Fn, sizeof...(R)>{&tile_int8<R + 1>...};
}
constexpr auto kTilesInt8 = tiles_int8(std::make_integer_sequence<int, int(MR)>{});

// From CPUID leaf 7, ECX bit 11 (clang 14's __builtin_cpu_supports does not
// know "avx512vnni").
bool has_avx512_vnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11)) != 0;
}

// From CPUID leaf 7 subleaf 1, EAX bit 5 (clang 14's __builtin_cpu_supports
// does not know "avx512bf16").
bool has_avx512_bf16() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 1, &a, &b, &c, &d) && (a & (1u << 5)) != 0;
}
#endif

// The two formats of a packed panel: the f32 kernel's one k per float, and
// the bf16 kernel's two k per 32-bit word.
// Where a register tile lies, for a format whose last k block finishes the
// tile in registers (int8): rows i.., columns j0.., `last` for the last block.
struct TileSpot {
  bool last;
  int64_t i, j0;
};

struct F32Format {
  using A = float;
  using W = float;
  static constexpr int64_t kStep = 1, kMaxBlock = kMaxKC;
#ifdef RLX_PACKED_GEMM
  template <class... Args> static void tile(int64_t R, const void*, TileSpot, Args... args) {
    kTiles[size_t(R - 1)](args...);
  }
#endif
};
struct Bf16Format {
  using A = BFloat;
  using W = uint32_t;
  static constexpr int64_t kStep = 2, kMaxBlock = kMaxKCPairs;
#ifdef RLX_PACKED_GEMM
  template <class... Args> static void tile(int64_t R, const void*, TileSpot, Args... args) {
    kTilesBf16[size_t(R - 1)](args...);
  }
#endif
};

struct Int8Format {
  using A = uint8_t;
  using W = uint32_t;
  static constexpr int64_t kStep = 4, kMaxBlock = kMaxKCQuads;
#ifdef RLX_PACKED_GEMM
  template <class... Args> static void tile(int64_t R, const void* epilogue, TileSpot spot, Args... args) {
    kTilesInt8[size_t(R - 1)](args..., spot.last ? static_cast<const Int8Epilogue*>(epilogue) : nullptr, spot.i,
                              spot.j0);
  }
#endif
};

// Rows [i0, i0 + rows) x k [k0, k0 + kc) of op(A) for A stored [k, m]
// (trans_a), as dense rows of kc. A stored [m, k] is read in place.
// Each dense row is ld >= kc long (ld even for bf16 pairs).
template <class T>
void pack_a_transposed(const T* a, int64_t lda, int64_t i0, int64_t rows, int64_t k0, int64_t kc, T* dst,
                       int64_t ld) {
  for (int64_t kk = 0; kk < kc; ++kk)
    for (int64_t r = 0; r < rows; ++r) dst[r * ld + kk] = a[(k0 + kk) * lda + i0 + r];
}

// C (m x n) = act(op(A) @ B + bias) over a panel format F: the one driver of
// both kernels. A few units per thread, handed out dynamically: groups of
// panels times blocks of rows, a group's blocks of rows one after another (a
// thread takes consecutive units), so its panels stay in L2 (at most ~1 MB
// of them) while the rows stream past. A is read in place (a transposed A is
// copied per unit into rows).
// `finish(row, i, j0, cols)` runs on each finished row piece of C (row i,
// columns [j0, j0 + cols)) while it is in cache; `epilogue` says whether
// there is anything to run. `tile_epilogue` goes to the format's tiles
// (int8's last k block finishes in registers).
template <class F, class Finish>
void run_packed(bool trans_a, int64_t m, int64_t n, int64_t k, const typename F::A* a, int64_t lda,
                const typename F::W* packed_b, float* c, int64_t ldc, bool epilogue, const Finish& finish,
                int threads, const void* tile_epilogue = nullptr) {
#ifdef RLX_PACKED_GEMM
  using A = typename F::A;
  if (m <= 0 || n <= 0) return;
  const int64_t panels = (n + NR - 1) / NR, mblocks = (m + kMC - 1) / kMC;
  const int64_t steps = (k + F::kStep - 1) / F::kStep;  // words per panel column
  const int64_t want = std::max<int64_t>(1, (4 * threads + mblocks - 1) / mblocks);
  const int64_t fit = std::max<int64_t>(1, (int64_t(1) << 20) / (std::max<int64_t>(steps, 1) * NR * 4));
  const int64_t per_group = std::min(fit, (panels + std::min(want, panels) - 1) / std::min(want, panels));
  const int64_t groups = (panels + per_group - 1) / per_group;
  const int64_t kc_max = k_block(k, F::kMaxBlock, F::kStep);
  parallel_ranges(mblocks * groups, threads, [&](int64_t u0, int64_t u1, int) {
    thread_local std::vector<A> ap;
    if (trans_a && ap.size() < size_t(kMC * std::max<int64_t>(kc_max, 1)))
      ap.resize(size_t(kMC * std::max<int64_t>(kc_max, 1)));
    for (int64_t u = u0; u < u1; ++u) {
      const int64_t i0 = (u % mblocks) * kMC, rows = std::min(kMC, m - i0);
      const int64_t p0 = (u / mblocks) * per_group, p1 = std::min(panels, p0 + per_group);
      if (k == 0)  // empty inner product: C is zero (then the epilogue)
        for (int64_t i = i0; i < i0 + rows; ++i)
          std::fill(c + i * ldc + p0 * NR, c + i * ldc + std::min(n, p1 * NR), 0.f);
      for (int64_t k0 = 0; k0 < k; k0 += kc_max) {
        const int64_t kc = std::min(kc_max, k - k0);
        const A* ab = a + i0 * lda + k0;  // this block's rows, from k0
        int64_t ab_ld = lda;
        if (trans_a) {
          pack_a_transposed(a, lda, i0, rows, k0, kc, ap.data(), kc_max);
          ab = ap.data(), ab_ld = kc_max;
        }
        for (int64_t p = p0; p < p1; ++p) {
          const typename F::W* bp = packed_b + p * steps * NR + k0 / F::kStep * NR;
          const int64_t j0 = p * NR, cols = std::min(NR, n - j0);
          for (int64_t t = 0; t < rows; t += MR) {
            const int64_t R = std::min(MR, rows - t);
            float* ct = c + (i0 + t) * ldc + j0;
            // The first tile of a panel fetches the next panel's block.
            const typename F::W* next = t == 0 && p + 1 < p1 ? bp + steps * NR : nullptr;
            F::tile(R, tile_epilogue, TileSpot{k0 + kc == k, i0 + t, j0}, kc, ab + t * ab_ld, ab_ld, bp, ct, ldc,
                    cols, k0 > 0, next);
            if (epilogue && k0 + kc == k)
              for (int64_t r = 0; r < R; ++r) finish(ct + r * ldc, i0 + t + r, j0, cols);
          }
        }
      }
      if (epilogue && k == 0)
        for (int64_t i = i0; i < i0 + rows; ++i)
          for (int64_t p = p0; p < p1; ++p) {
            const int64_t j0 = p * NR, cols = std::min(NR, n - j0);
            finish(c + i * ldc + j0, i, j0, cols);
          }
    }
  });
#else
  (void)trans_a, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)packed_b, (void)c, (void)ldc, (void)epilogue,
      (void)finish, (void)threads, (void)tile_epilogue;
  RLX_FAIL("cpu: the packed GEMM needs an x86-64 build");
#endif
}

}  // namespace

bool packed_gemm_available() {
#ifdef RLX_PACKED_GEMM
  static const bool ok = __builtin_cpu_supports("avx512f");
  return ok;
#else
  return false;
#endif
}

// CPUID traps to the hypervisor in a virtual machine: asked once.
// RLX_CPU_BF16_GEMM=0 keeps bf16 weights on the f32 kernel (for measuring).
bool packed_bf16_available() {
#ifdef RLX_PACKED_GEMM
  static const bool ok = [] {
    const char* env = std::getenv("RLX_CPU_BF16_GEMM");
    if (env && std::string_view(env) == "0") return false;
    return packed_gemm_available() && has_avx512_bf16();
  }();
  return ok;
#else
  return false;
#endif
}

bool packed_int8_available() {
#ifdef RLX_PACKED_GEMM
  static const bool ok = packed_gemm_available() && has_avx512_vnni();
  return ok;
#else
  return false;
#endif
}

bool packs_bf16_pairs(DType weights) { return weights == DType::BF16 && packed_bf16_available(); }

// Thread CPU time, one thread, alternating with OpenBLAS 0.3.34 (SkylakeX
// kernels) in one process, median of 21 (docs/PERF.md): the packed kernel is
// 2.2-3.2x faster at 8 rows, 1.5-2.0x at 32, 1.07-1.22x at 128, 1.01-1.09x
// at 256, and 0.81-1.04x from 512 rows up, where the library's own packing is
// spread over many rows and its kernel is the faster one. Where the library
// runs its AVX2 kernels on this AVX-512 processor (gemm_library_avx512), the
// packed kernel takes every shape: 512 MiniLM sentences embed in 1.46 s
// against 2.23-2.32 s (docs/PERF.md).
bool packed_gemm_wins(int64_t m, int64_t n, int64_t k) { return m <= 256 || !gemm_library_avx512(); }

template <class T>
void pack_weights(const T* b, int64_t n, int64_t k, int64_t ldb, bool trans_b, float* dst) {
  const int64_t panels = (n + NR - 1) / NR;
  parallel_for(panels, n * k > 65536, [&](int64_t p) {
    float* d = dst + p * k * NR;
    const int64_t j0 = p * NR, cols = std::min(NR, n - j0);
    for (int64_t j = 0; j < NR; ++j) {
      if (j >= cols) {
        for (int64_t kk = 0; kk < k; ++kk) d[kk * NR + j] = 0.f;
      } else if (trans_b) {  // op(B)[kk][j] = B[j][kk]: a row of B is a column of the panel
        const T* src = b + (j0 + j) * ldb;
        for (int64_t kk = 0; kk < k; ++kk) d[kk * NR + j] = to_f32(src[kk]);
      } else {
        for (int64_t kk = 0; kk < k; ++kk) d[kk * NR + j] = to_f32(b[kk * ldb + j0 + j]);
      }
    }
  });
}

template void pack_weights<float>(const float*, int64_t, int64_t, int64_t, bool, float*);
template void pack_weights<Half>(const Half*, int64_t, int64_t, int64_t, bool, float*);
template void pack_weights<BFloat>(const BFloat*, int64_t, int64_t, int64_t, bool, float*);

void pack_weights_bf16_pairs(const BFloat* b, int64_t n, int64_t k, int64_t ldb, bool trans_b, uint32_t* dst) {
  const int64_t panels = (n + NR - 1) / NR, pairs = (k + 1) / 2;
  parallel_for(panels, n * k > 65536, [&](int64_t p) {
    uint32_t* d = dst + p * pairs * NR;
    const int64_t j0 = p * NR, cols = std::min(NR, n - j0);
    for (int64_t j = 0; j < NR; ++j)
      for (int64_t kp = 0; kp < pairs; ++kp) {
        uint32_t w = 0;
        if (j < cols)
          for (int64_t h = 0; h < 2 && 2 * kp + h < k; ++h) {
            const int64_t kk = 2 * kp + h;
            const BFloat v = trans_b ? b[(j0 + j) * ldb + kk] : b[kk * ldb + j0 + j];
            w |= uint32_t(v.bits) << (16 * h);
          }
        d[kp * NR + j] = w;
      }
  });
}

PackedInt8 packed_int8_parts(const uint32_t* packed, int64_t n, int64_t k) {
  const int64_t cols = (n + NR - 1) / NR * NR;
  PackedInt8 v;
  v.words = packed;
  v.scales = reinterpret_cast<const float*>(packed + cols * packed_int8_quads(k));
  v.sums = reinterpret_cast<const int32_t*>(packed + cols * packed_int8_quads(k) + cols);
  return v;
}

template <class T>
void pack_weights_int8(const T* b, int64_t n, int64_t k, int64_t ldb, bool trans_b, uint32_t* dst) {
  const int64_t panels = (n + NR - 1) / NR, quads = packed_int8_quads(k), cols_all = panels * NR;
  auto* scales = reinterpret_cast<float*>(dst + cols_all * quads);
  auto* sums = reinterpret_cast<int32_t*>(dst + cols_all * quads + cols_all);
  parallel_for(panels, n * k > 65536, [&](int64_t p) {
    uint32_t* d = dst + p * quads * NR;
    const int64_t j0 = p * NR, cols = std::min(NR, n - j0);
    std::vector<float> col(size_t(std::max<int64_t>(k, 1)));
    for (int64_t j = 0; j < NR; ++j) {
      float amax = 0.f;
      for (int64_t kk = 0; j < cols && kk < k; ++kk) {
        col[size_t(kk)] = to_f32(trans_b ? b[(j0 + j) * ldb + kk] : b[kk * ldb + j0 + j]);
        amax = std::max(amax, std::fabs(col[size_t(kk)]));
      }
      const float scale = amax / 127.f, inv = amax > 0.f ? 127.f / amax : 0.f;
      int32_t sum = 0;
      for (int64_t kq = 0; kq < quads; ++kq) {
        uint32_t w = 0;
        for (int64_t h = 0; h < 4 && j < cols && 4 * kq + h < k; ++h) {
          const int32_t q = int32_t(std::clamp(std::nearbyint(col[size_t(4 * kq + h)] * inv), -127.f, 127.f));
          sum += q;
          w |= uint32_t(uint8_t(int8_t(q))) << (8 * h);
        }
        d[kq * NR + j] = w;
      }
      scales[j0 + j] = j < cols ? scale : 0.f;
      sums[j0 + j] = sum;
    }
  });
}

template void pack_weights_int8<float>(const float*, int64_t, int64_t, int64_t, bool, uint32_t*);
template void pack_weights_int8<Half>(const Half*, int64_t, int64_t, int64_t, bool, uint32_t*);
template void pack_weights_int8<BFloat>(const BFloat*, int64_t, int64_t, int64_t, bool, uint32_t*);

void gemm_packed(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* packed_b,
                 float* c, int64_t ldc, const float* bias, Activation act, int threads) {
  const auto finish = [&](float* row, int64_t, int64_t j0, int64_t cols) {
    activation_row(act, row, bias ? bias + j0 : nullptr, row, cols);
  };
  run_packed<F32Format>(trans_a, m, n, k, a, lda, packed_b, c, ldc, bias || act != Activation::None, finish,
                        threads);
}

void gemm_packed_bf16(bool trans_a, int64_t m, int64_t n, int64_t k, const BFloat* a, int64_t lda,
                      const uint32_t* packed_b, float* c, int64_t ldc, const float* bias, Activation act,
                      int threads, const Bf16Output& out) {
  RLX_CHECK(packed_bf16_available(), "cpu: the bf16 packed GEMM needs AVX512-BF16");
  const auto finish = [&](float* row, int64_t i, int64_t j0, int64_t cols) {
    if (bias || act != Activation::None) activation_row(act, row, bias ? bias + j0 : nullptr, row, cols);
    if (out.out)
      narrow_row_bf16(row, out.residual ? out.residual + i * out.ld + j0 : nullptr, out.out + i * out.ld + j0, cols);
  };
  run_packed<Bf16Format>(trans_a, m, n, k, a, lda, packed_b, c, ldc,
                         bias || act != Activation::None || out.out != nullptr, finish, threads);
}

void gemm_packed_int8(int64_t m, int64_t n, int64_t k, const Int8Rows& a, const uint32_t* packed_b, float* c,
                      int64_t ldc, const float* bias, Activation act, int threads, const Bf16Output& out) {
  RLX_CHECK(packed_int8_available(), "cpu: the int8 packed GEMM needs AVX512-VNNI");
#ifdef RLX_PACKED_GEMM
  const PackedInt8 w = packed_int8_parts(packed_b, n, k);
  Int8Epilogue e;
  e.scale_a = a.scales, e.zero_a = a.zeros, e.scale_b = w.scales, e.sums = w.sums, e.bias = bias;
  // Narrowed in the tile where nothing comes between (no activation) and
  // VCVTNEPS2BF16 is there (VNNI without AVX512-BF16: Ice Lake).
  static const bool bf16 = has_avx512_bf16();  // CPUID traps to the hypervisor in a VM: asked once
  const bool in_tile = out.out && act == Activation::None && bf16;
  if (in_tile) e.out = out.out, e.residual = out.residual, e.ld = out.ld;
  const auto finish = [&](float* row, int64_t i, int64_t j0, int64_t cols) {
    if (act != Activation::None) activation_row(act, row, nullptr, row, cols);
    if (!out.out || in_tile) return;
    const BFloat* res = out.residual ? out.residual + i * out.ld + j0 : nullptr;
    BFloat* o = out.out + i * out.ld + j0;
    if (bf16) return narrow_row_bf16(row, res, o, cols);
    for (int64_t j = 0; j < cols; ++j) o[j] = from_f32<BFloat>(row[j] + (res ? to_f32(res[j]) : 0.f));
  };
  if (k == 0) {  // no tile runs: C is the bias, then the rest of the epilogue
    for (int64_t i = 0; i < m; ++i) {
      for (int64_t j = 0; j < n; ++j) c[i * ldc + j] = bias ? bias[j] : 0.f;
      if (act != Activation::None) activation_row(act, c + i * ldc, nullptr, c + i * ldc, n);
      if (out.out)
        for (int64_t j = 0; j < n; ++j)
          out.out[i * out.ld + j] = from_f32<BFloat>(c[i * ldc + j] + (out.residual ? to_f32(out.residual[i * out.ld + j]) : 0.f));
    }
    return;
  }
  run_packed<Int8Format>(false, m, n, k, a.q, a.ld, packed_b, c, ldc, act != Activation::None || (out.out && !in_tile),
                         finish, threads, &e);
#else
  (void)m, (void)n, (void)k, (void)a, (void)packed_b, (void)c, (void)ldc, (void)bias, (void)act, (void)threads,
      (void)out;
#endif
}

}  // namespace rlx::cpu
