#include "backends/cpu/cpu_quant_rows16.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <vector>

#include "backends/cpu/cpu_quant_gemm.h"
#include "rlx/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define RLX_ROWS16_X86 1
#define RLX_TARGET_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c,fma")))
#endif
// GCC 12's intrinsics start conversions from `__m512 __Y = __Y;`, which its
// own flow analysis then reports once inlined into the tiles' loops.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

namespace rlx::cpu {
namespace {

std::atomic<uint64_t> g_rows16_calls{0}, g_rows16_many{0};

constexpr int64_t kLanes = 16;        // weight rows a group
constexpr int64_t kGroupBytes = 128;  // activation bytes per group of 4 blocks (cpu_quant_dot.h)

struct Shape {
  int64_t blocks, block_bytes, per, row_bytes, row_scales;
  Shape(QuantType t, int64_t k)
      : blocks(k / kQuantBlock),
        block_bytes(quant_block_bytes(t)),
        per(quant_scales_per_block(t)),
        row_bytes(blocks * block_bytes),
        row_scales(blocks * per) {}
  // Offset of row-layout byte j of lane l's block b inside its group.
  int64_t quant(int64_t l, int64_t b, int64_t j) const {
    return b * kLanes * block_bytes + (j / 4) * 64 + l * 4 + j % 4;
  }
  int64_t scale(int64_t l, int64_t b, int64_t s) const { return b * kLanes * per + s * kLanes + l; }
};

uint8_t flip_of(QuantType t) { return t == QuantType::Q8_0 ? 0x80 : 0; }

}  // namespace

namespace {

// Each 16-row group copied aside and written back in the other layout:
// to the interleaved one (pack) or to rows. The flip is its own inverse.
void permute_rows16(QuantType t, uint8_t* quants, uint16_t* scales, int64_t n, int64_t k, bool pack) {
  const Shape sh(t, k);
  const uint8_t flip = flip_of(t);
  std::vector<uint8_t> q(size_t(kLanes * sh.row_bytes));
  std::vector<uint16_t> s(size_t(kLanes * sh.row_scales));
  for (int64_t g = 0; g < n / kLanes; ++g) {
    uint8_t* gq = quants + g * kLanes * sh.row_bytes;
    uint16_t* gs = scales + g * kLanes * sh.row_scales;
    std::memcpy(q.data(), gq, q.size());
    std::memcpy(s.data(), gs, s.size() * sizeof(uint16_t));
    for (int64_t l = 0; l < kLanes; ++l)
      for (int64_t b = 0; b < sh.blocks; ++b) {
        for (int64_t j = 0; j < sh.block_bytes; ++j) {
          const int64_t row = l * sh.row_bytes + b * sh.block_bytes + j, lane = sh.quant(l, b, j);
          gq[pack ? lane : row] = uint8_t(q[size_t(pack ? row : lane)] ^ flip);
        }
        for (int64_t c = 0; c < sh.per; ++c) {
          const int64_t row = l * sh.row_scales + b * sh.per + c, lane = sh.scale(l, b, c);
          gs[pack ? lane : row] = s[size_t(pack ? row : lane)];
        }
      }
  }
}

}  // namespace

void pack_rows16(QuantType t, uint8_t* quants, uint16_t* scales, int64_t n, int64_t k) {
  RLX_CHECK(t != QuantType::FP8, "matmul_q: fp8 weights are never interleaved");
  permute_rows16(t, quants, scales, n, k, true);
}

void unpack_rows16(QuantType t, uint8_t* quants, uint16_t* scales, int64_t n, int64_t k) {
  permute_rows16(t, quants, scales, n, k, false);
}

void rows16_block(QuantType t, const uint8_t* quants, const uint16_t* scales, int64_t k, int64_t row, int64_t b,
                  uint8_t* q, uint16_t* s) {
  const Shape sh(t, k);
  const int64_t g = row / kLanes, l = row % kLanes;
  const uint8_t* gq = quants + g * kLanes * sh.row_bytes;
  const uint16_t* gs = scales + g * kLanes * sh.row_scales;
  for (int64_t j = 0; j < sh.block_bytes; ++j) q[j] = uint8_t(gq[sh.quant(l, b, j)] ^ flip_of(t));
  for (int64_t c = 0; c < sh.per; ++c) s[c] = gs[sh.scale(l, b, c)];
}

#ifdef RLX_ROWS16_X86
namespace {

RLX_TARGET_VNNI inline __attribute__((always_inline)) __m512i bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// One block's exact integer sum S for one row of x, in 16 lanes (one per
// weight row): 4-bit weights as w[0..3] (low nibbles) and w[4..7] (high),
// Q8_0 as w[0..7] (q + 128). Four independent chains (first digit, second
// digit; two halves of the block), summed exactly at the end: with one row
// of x (decode) a single chain would wait on VPDPBUSD's latency.
template <QuantType Q>
RLX_TARGET_VNNI inline __attribute__((always_inline)) __m512i block_sum(const __m512i* w, const int8_t* xq,
                                                                       const int8_t* xr, int64_t t, int32_t c) {
  const __m512i zero = _mm512_setzero_si512();
  __m512i q0 = zero, q1 = zero, r0 = zero, r1 = zero;
  if constexpr (Q == QuantType::Q8_0) {
    // x's block t: bytes [32t, 32t + 32) of the group; the first digit's
    // chain starts at -c, which takes out the 128 * x that w + 128 adds:
    // 128 (sum((w + 128) q) - c) + sum((w + 128) r) = 128 sum(w q) + sum(w r).
    q0 = _mm512_set1_epi32(-c);
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      q0 = _mm512_dpbusd_epi32(q0, w[v], bcast4(xq + t * 32 + 4 * v));
      q1 = _mm512_dpbusd_epi32(q1, w[v + 4], bcast4(xq + t * 32 + 16 + 4 * v));
      r0 = _mm512_dpbusd_epi32(r0, w[v], bcast4(xr + t * 32 + 4 * v));
      r1 = _mm512_dpbusd_epi32(r1, w[v + 4], bcast4(xr + t * 32 + 16 + 4 * v));
    }
  } else {
    // x's block t: values 0-15 at 16t, 16-31 at 64 + 16t (cpu_quant_dot.h).
    (void)c;
#pragma GCC unroll 4
    for (int v = 0; v < 4; ++v) {
      q0 = _mm512_dpbusd_epi32(q0, w[v], bcast4(xq + t * 16 + 4 * v));
      q1 = _mm512_dpbusd_epi32(q1, w[v + 4], bcast4(xq + 64 + t * 16 + 4 * v));
      r0 = _mm512_dpbusd_epi32(r0, w[v], bcast4(xr + t * 16 + 4 * v));
      r1 = _mm512_dpbusd_epi32(r1, w[v + 4], bcast4(xr + 64 + t * 16 + 4 * v));
    }
  }
  return _mm512_add_epi32(_mm512_slli_epi32(_mm512_add_epi32(q0, q1), 7), _mm512_add_epi32(r0, r1));
}

// One 16-row group against TX rows of x from row i0: acc[u] (16 lanes, one
// per weight row) += each block's term, block by block.
template <QuantType Q, int TX>
RLX_TARGET_VNNI inline __attribute__((always_inline)) void group_rows(const uint8_t* gq, const uint16_t* gs,
                                                                     int64_t blocks, const Q8Activations& a,
                                                                     int64_t i0, __m512* acc) {
  constexpr int64_t kBlockBytes = quant_block_bytes(Q) * kLanes, kPer = quant_scales_per_block(Q);
  const __m512i low = _mm512_set1_epi8(0x0f);
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* wb = gq + b * kBlockBytes;
    // 4 KB ahead (about 16 blocks of 4-bit rows): a 1B model's decode step
    // streams its weights from memory, and the hardware prefetcher alone
    // left it at 27-29 tok/s against 30-34 with this (docs/PERF.md).
#pragma GCC unroll 8
    for (int64_t v = 0; v < kBlockBytes; v += 64) _mm_prefetch(reinterpret_cast<const char*>(wb + 4096 + v), _MM_HINT_T0);
    __m512i w[8];
    if constexpr (Q == QuantType::Q8_0) {
#pragma GCC unroll 8
      for (int v = 0; v < 8; ++v) w[v] = _mm512_loadu_si512(wb + 64 * v);
    } else {
#pragma GCC unroll 4
      for (int v = 0; v < 4; ++v) {
        const __m512i q = _mm512_loadu_si512(wb + 64 * v);
        w[v] = _mm512_and_si512(q, low);
        w[v + 4] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low);
      }
    }
    const uint16_t* sb = gs + b * kLanes * kPer;
    const __m512 d = _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb)));
    const __m512 m = kPer == 2 ? _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(sb + kLanes)))
                               : _mm512_setzero_ps();
    const int64_t g = b / 4, t = b % 4;
#pragma GCC unroll 8
    for (int u = 0; u < TX; ++u) {
      const int64_t i = i0 + u;
      const __m512i s = block_sum<Q>(w, a.row_q(i) + g * kGroupBytes, a.row_r(i) + g * kGroupBytes, t,
                                     a.row_c(i)[b]);
      const __m512 sf = _mm512_cvtepi32_ps(s);
      const __m512 dx = _mm512_set1_ps(a.row_d(i)[b]);
      if constexpr (Q == QuantType::Q4_0) {
        acc[u] = _mm512_fmadd_ps(d, _mm512_fmadd_ps(sf, dx, _mm512_set1_ps(-8.f * a.row_s(i)[b])), acc[u]);
      } else if constexpr (Q == QuantType::Q4_1) {
        acc[u] = _mm512_fmadd_ps(d, _mm512_mul_ps(sf, dx), _mm512_fmadd_ps(m, _mm512_set1_ps(a.row_s(i)[b]), acc[u]));
      } else {
        acc[u] = _mm512_fmadd_ps(d, _mm512_mul_ps(sf, dx), acc[u]);
      }
    }
  }
}

template <QuantType Q, int TX>
RLX_TARGET_VNNI void groups_tile(const QuantRows& w, int64_t g0, int64_t g1, const Q8Activations& a, int64_t i0,
                                 float* y, int64_t ldy) {
  for (int64_t g = g0; g < g1; ++g) {
    __m512 acc[TX];
#pragma GCC unroll 8
    for (int u = 0; u < TX; ++u) acc[u] = _mm512_setzero_ps();
    group_rows<Q, TX>(w.quants + g * kLanes * w.row_bytes, w.scales + g * kLanes * w.row_scales, a.blocks, a, i0,
                      acc);
#pragma GCC unroll 8
    for (int u = 0; u < TX; ++u) _mm512_storeu_ps(y + (i0 + u) * ldy + g * kLanes, acc[u]);
  }
}

// Groups in chunks small enough to stay in L2 while every tile of rows of
// x (8, then 4, 2, 1) passes over them.
template <QuantType Q>
RLX_TARGET_VNNI void product(const QuantRows& w, int64_t g0, int64_t g1, const Q8Activations& a, float* y,
                             int64_t ldy) {
  const int64_t chunk = std::max<int64_t>(1, (256 << 10) / std::max<int64_t>(1, kLanes * w.row_bytes));
  for (int64_t c0 = g0; c0 < g1; c0 += chunk) {
    const int64_t c1 = std::min(g1, c0 + chunk);
    int64_t i = 0;
    for (; i + 8 <= a.m; i += 8) groups_tile<Q, 8>(w, c0, c1, a, i, y, ldy);
    if (i + 4 <= a.m) groups_tile<Q, 4>(w, c0, c1, a, i, y, ldy), i += 4;
    if (i + 2 <= a.m) groups_tile<Q, 2>(w, c0, c1, a, i, y, ldy), i += 2;
    if (i < a.m) groups_tile<Q, 1>(w, c0, c1, a, i, y, ldy);
  }
}

}  // namespace
#endif

void product_rows16(QuantType t, const QuantRows& w, int64_t g0, int64_t g1, const Q8Activations& a, float* y,
                    int64_t ldy) {
  RLX_CHECK(quant_kernel_runs(QuantKernel::Avx512Vnni), "matmul_q: interleaved weights need AVX512-VNNI");
  RLX_CHECK(t != QuantType::FP8, "matmul_q: fp8 weights are never interleaved");
#ifdef RLX_ROWS16_X86
  if (t == QuantType::Q8_0) product<QuantType::Q8_0>(w, g0, g1, a, y, ldy);
  else if (t == QuantType::Q4_0) product<QuantType::Q4_0>(w, g0, g1, a, y, ldy);
  else product<QuantType::Q4_1>(w, g0, g1, a, y, ldy);
#else
  (void)t, (void)w, (void)g0, (void)g1, (void)a, (void)y, (void)ldy;
#endif
}

uint64_t rows16_calls() { return g_rows16_calls.load(); }
uint64_t rows16_many_row_calls() { return g_rows16_many.load(); }
void count_rows16_call(int64_t m) {
  g_rows16_calls.fetch_add(1, std::memory_order_relaxed);
  if (m >= kQuantGemmRows) g_rows16_many.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace rlx::cpu
