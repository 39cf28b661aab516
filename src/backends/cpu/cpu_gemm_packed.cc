#include "backends/cpu/cpu_gemm_packed.h"

#include <algorithm>
#include <array>
#include <utility>
#include <vector>

#include "backends/cpu/cpu_activation.h"
#include "backends/cpu/cpu_parallel.h"

#if defined(__x86_64__) && defined(__GNUC__)
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

// Equal k blocks of at most kMaxKC: the block boundaries depend on k alone,
// so the order of every sum does too.
int64_t k_block(int64_t k) {
  const int64_t blocks = (k + kMaxKC - 1) / kMaxKC;
  return blocks == 0 ? 0 : (k + blocks - 1) / blocks;
}

#ifdef RLX_PACKED_GEMM
#define RLX_AVX512 __attribute__((target("avx512f")))

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

using TileFn = void (*)(int64_t, const float*, int64_t, const float*, float*, int64_t, int64_t, bool, const float*);
template <int... R> constexpr auto tiles(std::integer_sequence<int, R...>) {
  return std::array<TileFn, sizeof...(R)>{&tile<R + 1>...};
}
constexpr auto kTiles = tiles(std::make_integer_sequence<int, int(MR)>{});
#endif

// Rows [i0, i0 + rows) x k [k0, k0 + kc) of op(A) for A stored [k, m]
// (trans_a), as dense rows of kc. A stored [m, k] is read in place.
void pack_a_transposed(const float* a, int64_t lda, int64_t i0, int64_t rows, int64_t k0, int64_t kc, float* dst) {
  for (int64_t kk = 0; kk < kc; ++kk)
    for (int64_t r = 0; r < rows; ++r) dst[r * kc + kk] = a[(k0 + kk) * lda + i0 + r];
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

// Thread CPU time, one thread, alternating with OpenBLAS 0.3.34 (SkylakeX
// kernels) in one process, median of 21 (docs/PERF.md): the packed kernel is
// 2.2-3.2x faster at 8 rows, 1.5-2.0x at 32, 1.07-1.22x at 128, 1.01-1.09x
// at 256, and 0.81-1.04x from 512 rows up, where the library's own packing is
// spread over many rows and its kernel is the faster one.
bool packed_gemm_wins(int64_t m, int64_t n, int64_t k) { return m <= 256; }

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

void gemm_packed(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* packed_b,
                 float* c, int64_t ldc, const float* bias, Activation act, int threads) {
#ifdef RLX_PACKED_GEMM
  if (m <= 0 || n <= 0) return;
  const bool epilogue = bias || act != Activation::None;
  const int64_t panels = (n + NR - 1) / NR, mblocks = (m + kMC - 1) / kMC;
  // A few units per thread, handed out dynamically: groups of panels times
  // blocks of rows, a group's blocks of rows one after another (a thread
  // takes consecutive units), so its panels stay in L2 (at most ~1 MB of
  // them) while the rows stream past. A is read in place (a transposed A is
  // copied per unit into rows).
  const int64_t want = std::max<int64_t>(1, (4 * threads + mblocks - 1) / mblocks);
  const int64_t fit = std::max<int64_t>(1, (int64_t(1) << 20) / (std::max<int64_t>(k, 1) * NR * 4));
  const int64_t per_group = std::min(fit, (panels + std::min(want, panels) - 1) / std::min(want, panels));
  const int64_t groups = (panels + per_group - 1) / per_group;
  const int64_t kc_max = k_block(k);
  parallel_ranges(mblocks * groups, threads, [&](int64_t u0, int64_t u1, int) {
    thread_local std::vector<float> ap;
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
        const float* ab = a + i0 * lda + k0;  // this block's rows, from k0
        int64_t ab_ld = lda;
        if (trans_a) {
          pack_a_transposed(a, lda, i0, rows, k0, kc, ap.data());
          ab = ap.data(), ab_ld = kc;
        }
        for (int64_t p = p0; p < p1; ++p) {
          const float* bp = packed_b + p * k * NR + k0 * NR;
          const int64_t j0 = p * NR, cols = std::min(NR, n - j0);
          for (int64_t t = 0; t < rows; t += MR) {
            const int64_t R = std::min(MR, rows - t);
            float* ct = c + (i0 + t) * ldc + j0;
            // The first tile of a panel fetches the next panel's block.
            const float* next = t == 0 && p + 1 < p1 ? bp + k * NR : nullptr;
            kTiles[size_t(R - 1)](kc, ab + t * ab_ld, ab_ld, bp, ct, ldc, cols, k0 > 0, next);
            if (epilogue && k0 + kc == k)
              for (int64_t r = 0; r < R; ++r) activation_row(act, ct + r * ldc, bias ? bias + j0 : nullptr, ct + r * ldc, cols);
          }
        }
      }
      if (epilogue && k == 0)
        for (int64_t i = i0; i < i0 + rows; ++i)
          for (int64_t p = p0; p < p1; ++p) {
            const int64_t j0 = p * NR, cols = std::min(NR, n - j0);
            activation_row(act, c + i * ldc + j0, bias ? bias + j0 : nullptr, c + i * ldc + j0, cols);
          }
    }
  });
#else
  (void)trans_a, (void)m, (void)n, (void)k, (void)a, (void)lda, (void)packed_b, (void)c, (void)ldc, (void)bias,
      (void)act, (void)threads;
  RLX_FAIL("cpu: the packed GEMM needs an x86-64 build");
#endif
}

}  // namespace rlx::cpu
