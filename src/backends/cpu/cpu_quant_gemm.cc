#include "backends/cpu/cpu_quant_gemm.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "backends/cpu/cpu_quant_reduce.h"
#include "rlx/error.h"

namespace rlx::cpu {
namespace {

std::atomic<uint64_t> g_gemm_calls{0};

// A tile: kTileW weight rows x kTileX rows of x, 2 accumulators each, 16 of
// the 32 vector registers. 4-bit weights take 1 x 8 (their nibbles' split
// is then shared by 8 rows of x), Q8_0 2 x 4 (1 x 8 measured slower).
template <QuantType Q> constexpr int kTileW = Q == QuantType::Q8_0 ? 2 : 1;
template <QuantType Q> constexpr int kTileX = Q == QuantType::Q8_0 ? 4 : 8;
constexpr int tile_rows(QuantType t) { return t == QuantType::Q8_0 ? kTileX<QuantType::Q8_0> : kTileX<QuantType::Q4_0>; }

constexpr int64_t kGroup = 4;         // blocks a group
constexpr int64_t kGroupBytes = 128;  // activation bytes a group (each digit)

#if defined(__x86_64__) && defined(__GNUC__)

// One group of 4 blocks, 4-bit weights: as dot_vnni_4bit, for RW weight
// rows against a tile's rows of x; acc0 and acc1 per (weight row, row of x)
// as there.
template <QuantType Q, int RW, bool Full>
RLX_TARGET_AVX512 inline __attribute__((always_inline)) void group_4bit(const uint8_t* const* wq, const uint16_t* const* ws,
                                                                        const uint8_t* x, int64_t g, int64_t nt,
                                                                        __m512* acc0, __m512* acc1) {
  constexpr int kPer = Q == QuantType::Q4_1 ? 2 : 1;
  constexpr int TX = kTileX<Q>;
  const __m512i low = _mm512_set1_epi8(0x0f);
  const __m512i idx_d = _mm512_set_epi32(3 * kPer, 3 * kPer, 3 * kPer, 3 * kPer, 2 * kPer, 2 * kPer, 2 * kPer, 2 * kPer,
                                         kPer, kPer, kPer, kPer, 0, 0, 0, 0);
  __m512i lo[RW], hi[RW];
  __m512 d[RW], m[RW];
#pragma GCC unroll 4
  for (int v = 0; v < RW; ++v) {
    const uint8_t* wg = wq[v] + g * 64;
    const uint16_t* sg = ws[v] + g * kGroup * kPer;
    __m512i q;
    __m512 sc;
    if (Full) {
      q = _mm512_loadu_si512(wg);
      sc = kPer == 2 ? _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sg))))
                     : _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sg))));
    } else {  // the row's last blocks: nothing read past them
      q = _mm512_maskz_loadu_epi8(~0ull >> (64 - 16 * nt), wg);
      sc = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_maskz_loadu_epi16(__mmask8((1u << (nt * kPer)) - 1), sg)));
    }
    lo[v] = _mm512_and_si512(q, low);
    hi[v] = _mm512_and_si512(_mm512_srli_epi16(q, 4), low);
    d[v] = _mm512_permutexvar_ps(idx_d, sc);
    m[v] = Q == QuantType::Q4_1 ? _mm512_permutexvar_ps(_mm512_add_epi32(idx_d, _mm512_set1_epi32(1)), sc)
                                : _mm512_mul_ps(d[v], _mm512_set1_ps(-8.f));
  }
#pragma GCC unroll 8
  for (int u = 0; u < TX; ++u) {
    const uint8_t* xq = x + u * kGroupBytes;
    const uint8_t* xr = x + TX * kGroupBytes + u * kGroupBytes;
    const __m512 dl = _mm512_loadu_ps(x + 2 * TX * kGroupBytes + u * 64);
    const __m512 sl = _mm512_loadu_ps(x + 2 * TX * kGroupBytes + TX * 64 + u * 64);
#pragma GCC unroll 4
    for (int v = 0; v < RW; ++v) {
      __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo[v], _mm512_loadu_si512(xq));
      sum = _mm512_slli_epi32(_mm512_dpbusd_epi32(sum, hi[v], _mm512_loadu_si512(xq + 64)), 7);
      sum = _mm512_dpbusd_epi32(sum, lo[v], _mm512_loadu_si512(xr));
      sum = _mm512_dpbusd_epi32(sum, hi[v], _mm512_loadu_si512(xr + 64));
      const int t = v * TX + u;
      acc0[t] = _mm512_fmadd_ps(_mm512_mul_ps(d[v], dl), _mm512_cvtepi32_ps(sum), acc0[t]);
      acc1[t] = _mm512_fmadd_ps(m[v], sl, acc1[t]);
    }
  }
}

// Q8_0: as dot_vnni_q8_0, but each signed product as (w + 128) * x, so
// that w + 128 is the unsigned operand, flipped once a tile; the
// accumulator starts at z = -(128 sum(qx) + sum(rx)) over the lane's 4
// values (Q8Activations::zl), which takes out the 128 * x both digits add:
// ((z + sum((w + 128) qx)) << 7) + sum((w + 128) rx) = 128 sum(w qx) + sum(w rx),
// the one-row kernel's integer exactly.
template <int RW, bool Full>
RLX_TARGET_AVX512 inline __attribute__((always_inline)) void group_q8_0(const uint8_t* const* wq, const uint16_t* const* ws,
                                                                        const uint8_t* x, int64_t g, int64_t nt,
                                                                        __m512* acc0, __m512* acc1) {
  constexpr int TX = kTileX<QuantType::Q8_0>;
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  const __m512i idx0 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i idx1 = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
  __m512i u0[RW], u1[RW];
  __m512 d0[RW], d1[RW];
#pragma GCC unroll 4
  for (int v = 0; v < RW; ++v) {
    const uint8_t* wg = wq[v] + g * 128;
    const uint16_t* sg = ws[v] + g * kGroup;
    __m512i w0, w1;
    __m512 sc;
    if (Full) {
      w0 = _mm512_loadu_si512(wg);
      w1 = _mm512_loadu_si512(wg + 64);
      sc = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sg))));
    } else {  // past the row's end: w = 0 against x = 0
      const int64_t bytes = 32 * nt;
      w0 = _mm512_maskz_loadu_epi8(~0ull >> (64 - std::min<int64_t>(64, bytes)), wg);
      w1 = bytes > 64 ? _mm512_maskz_loadu_epi8(~0ull >> (128 - bytes), wg + 64) : _mm512_setzero_si512();
      sc = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_maskz_loadu_epi16(__mmask8((1u << nt) - 1), sg)));
    }
    u0[v] = _mm512_xor_si512(w0, flip);
    u1[v] = _mm512_xor_si512(w1, flip);
    d0[v] = _mm512_permutexvar_ps(idx0, sc);
    d1[v] = _mm512_permutexvar_ps(idx1, sc);
  }
#pragma GCC unroll 8
  for (int u = 0; u < TX; ++u) {
    const uint8_t* xq = x + u * kGroupBytes;
    const uint8_t* xr = x + TX * kGroupBytes + u * kGroupBytes;
    const uint8_t* xd = x + 2 * TX * kGroupBytes + u * 128;
    const uint8_t* z = x + 2 * TX * kGroupBytes + TX * 128 + u * 128;
#pragma GCC unroll 4
    for (int v = 0; v < RW; ++v) {
      __m512i s0 = _mm512_dpbusd_epi32(_mm512_loadu_si512(z), u0[v], _mm512_loadu_si512(xq));
      __m512i s1 = _mm512_dpbusd_epi32(_mm512_loadu_si512(z + 64), u1[v], _mm512_loadu_si512(xq + 64));
      s0 = _mm512_dpbusd_epi32(_mm512_slli_epi32(s0, 7), u0[v], _mm512_loadu_si512(xr));
      s1 = _mm512_dpbusd_epi32(_mm512_slli_epi32(s1, 7), u1[v], _mm512_loadu_si512(xr + 64));
      const int t = v * TX + u;
      acc0[t] = _mm512_fmadd_ps(_mm512_mul_ps(d0[v], _mm512_loadu_ps(xd)), _mm512_cvtepi32_ps(s0), acc0[t]);
      acc1[t] = _mm512_fmadd_ps(_mm512_mul_ps(d1[v], _mm512_loadu_ps(xd + 64)), _mm512_cvtepi32_ps(s1), acc1[t]);
    }
  }
}

template <QuantType Q, int RW, bool Full>
RLX_TARGET_AVX512 inline __attribute__((always_inline)) void group(const uint8_t* const* wq, const uint16_t* const* ws,
                                                                   const uint8_t* x, int64_t g, int64_t nt,
                                                                   __m512* acc0, __m512* acc1) {
  if constexpr (Q == QuantType::Q8_0) group_q8_0<RW, Full>(wq, ws, x, g, nt, acc0, acc1);
  else group_4bit<Q, RW, Full>(wq, ws, x, g, nt, acc0, acc1);
}

// Weight rows [r, r + RW) against the rows of x of tile t (rows of it past
// m, zero padding, are not stored).
template <QuantType Q, int RW>
RLX_TARGET_AVX512 inline __attribute__((always_inline)) void tile(const QuantRows& w, int64_t r,
                                                                  const ActivationTiles& a, int64_t t, float* y,
                                                                  int64_t ldy) {
  const uint8_t* wq[RW];
  const uint16_t* ws[RW];
#pragma GCC unroll 4
  for (int v = 0; v < RW; ++v) {
    wq[v] = w.quants + (r + v) * w.row_bytes;
    ws[v] = w.scales + (r + v) * w.row_scales;
  }
  const uint8_t* x = a.bytes.data() + t * a.groups * a.tile_bytes;
  constexpr int TX = kTileX<Q>;
  __m512 acc0[RW * TX], acc1[RW * TX];
#pragma GCC unroll 16
  for (int j = 0; j < RW * TX; ++j) acc0[j] = acc1[j] = _mm512_setzero_ps();
  const int64_t full = a.blocks / kGroup;
  for (int64_t g = 0; g < full; ++g, x += a.tile_bytes) group<Q, RW, true>(wq, ws, x, g, kGroup, acc0, acc1);
  if (full < a.groups) group<Q, RW, false>(wq, ws, x, full, a.blocks - full * kGroup, acc0, acc1);
#pragma GCC unroll 16
  for (int j = 0; j < RW * TX; ++j) acc0[j] = _mm512_add_ps(acc0[j], acc1[j]);
  float out[RW * TX];
  reduce_lanes_n<RW * TX>(acc0, out);
  const int rows = int(std::min<int64_t>(TX, a.m - t * TX));
  float* yt = y + t * TX * ldy + r;
#pragma GCC unroll 8
  for (int u = 0; u < TX; ++u)
    if (u < rows)
#pragma GCC unroll 4
      for (int v = 0; v < RW; ++v) yt[u * ldy + v] = out[v * TX + u];
}

// Each tile of rows of x against every weight row of the range: the
// tile's activations stay in L1, the weight rows come from L2.
template <QuantType Q>
RLX_TARGET_AVX512 void gemm_vnni(const QuantRows& w, int64_t r0, int64_t r1, const ActivationTiles& a, float* y,
                                 int64_t ldy) {
  constexpr int TW = kTileW<Q>, TX = kTileX<Q>;
  const int64_t tiles = (a.m + TX - 1) / TX;
  for (int64_t t = 0; t < tiles; ++t) {
    int64_t r = r0;
    for (; r + TW <= r1; r += TW) tile<Q, TW>(w, r, a, t, y, ldy);
    for (; r < r1; ++r) tile<Q, 1>(w, r, a, t, y, ldy);
  }
}

#endif

}  // namespace

void pack_activation_tiles(const Q8Activations& a, ActivationTiles& out) {
  const bool four_bit = quant_is_4bit(a.weights);
  const int64_t kRows = tile_rows(a.weights), kBytes = kGroupBytes;
  out.weights = a.weights;
  out.m = a.m, out.blocks = a.blocks, out.groups = a.groups;
  // Per row: two digits, then u per lane (16 or 32 floats), then sl (16) or zl (32).
  const int64_t lane_bytes = four_bit ? 64 : 128;
  out.tile_bytes = kRows * (2 * kBytes + 2 * lane_bytes);
  const int64_t tiles = (a.m + kRows - 1) / kRows;
  out.bytes.resize(size_t(tiles * a.groups * out.tile_bytes));  // grow-only
  // The last tile's rows past m: zeros (every other byte is copied below).
  for (int64_t i = a.m; i < tiles * kRows; ++i)
    for (int64_t g = 0; g < a.groups; ++g) {
      uint8_t* run = out.bytes.data() + ((i / kRows) * a.groups + g) * out.tile_bytes;
      const int64_t u = i % kRows;
      std::memset(run + u * kBytes, 0, kBytes);
      std::memset(run + kRows * kBytes + u * kBytes, 0, kBytes);
      std::memset(run + 2 * kRows * kBytes + u * lane_bytes, 0, size_t(lane_bytes));
      std::memset(run + 2 * kRows * kBytes + kRows * lane_bytes + u * lane_bytes, 0, size_t(lane_bytes));
    }
  for (int64_t i = 0; i < a.m; ++i)
    for (int64_t g = 0; g < a.groups; ++g) {
      uint8_t* run = out.bytes.data() + ((i / kRows) * a.groups + g) * out.tile_bytes;
      const int64_t u = i % kRows;
      std::memcpy(run + u * kBytes, a.row_q(i) + g * kBytes, kBytes);
      std::memcpy(run + kRows * kBytes + u * kBytes, a.row_r(i) + g * kBytes, kBytes);
      uint8_t* lanes = run + 2 * kRows * kBytes;
      std::memcpy(lanes + u * lane_bytes, a.row_dl(i) + g * 32, size_t(lane_bytes));
      if (four_bit) std::memcpy(lanes + kRows * lane_bytes + u * lane_bytes, a.row_sl(i) + g * 16, size_t(lane_bytes));
      else std::memcpy(lanes + kRows * lane_bytes + u * lane_bytes, a.row_zl(i) + g * 32, size_t(lane_bytes));
    }
}

QuantGemm quant_gemm(QuantType t) {
  RLX_CHECK(quant_kernel_runs(QuantKernel::Avx512Vnni), "matmul_q: the tiled path needs AVX512-VNNI");
  RLX_CHECK(t != QuantType::FP8, "matmul_q: fp8 weights have no integer kernel (the f32 one reads them)");
#if defined(__x86_64__) && defined(__GNUC__)
  if (t == QuantType::Q8_0) return gemm_vnni<QuantType::Q8_0>;
  return t == QuantType::Q4_0 ? gemm_vnni<QuantType::Q4_0> : gemm_vnni<QuantType::Q4_1>;
#else
  (void)t;
  return nullptr;
#endif
}

uint64_t quant_gemm_calls() { return g_gemm_calls.load(); }
void count_quant_gemm_call() { g_gemm_calls.fetch_add(1, std::memory_order_relaxed); }

}  // namespace rlx::cpu
