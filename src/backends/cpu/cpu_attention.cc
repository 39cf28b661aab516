// Scaled dot-product attention, blocked: one task is one (batch, head), its
// keys widened once into K^T [head_dim][skv] and its values into V
// [skv][head_dim], its queries taken in blocks of 32 rows, so Q.K^T, the softmax and P.V are
// all loops over contiguous floats that vectorize (no per-key horizontal
// sums). GQA, causal and padding masks, query positions read from the arena
// (a KV cache: keys past the last query's position are skipped). A sequence
// whose padding mask keeps none of its keys attends to every key, as Hugging
// Face's SDPA path does; a row left with no key otherwise (causal, or the
// cache) yields zeros. A sliding window (p.window) keeps only the last
// `window` keys up to each query's position, or without a causal mask the
// keys less than `window` away on either side; a soft cap bends each scaled
// score through cap * tanh(s / cap) before the softmax.
// A decode step in f32 (up to kDirectRows query rows) instead takes one task
// per (batch, key/value head) for all the query heads it serves and reads
// the cache in place (attention_direct), summing in the same order.
// A ring cache (p.ring: the key at position j in row j mod skv, a sliding-
// window layer's) is read from the window's first key rounded down to 32,
// so its sums run in the lanes and tiles a cache of every key would use.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <type_traits>
#include <utility>

#include "backends/cpu/cpu_parallel.h"
#include "backends/cpu/cpu_registry.h"
#include "backends/cpu/cpu_rope.h"
#include "backends/cpu/cpu_storage.h"
#include "backends/cpu/cpu_vec_math.h"

namespace rlx::cpu {
namespace {

constexpr int64_t kRowBlock = 32;  // query rows per task: scores stay in L1/L2
constexpr int64_t kDirectRows = 2;  // up to this many query rows, keys and values are read in place
constexpr float kMasked = -std::numeric_limits<float>::infinity();

// Values of f32x16 never cross a call (the helpers are always inlined), so
// GCC's note that their calling convention differs by ISA does not apply.
#pragma GCC diagnostic ignored "-Wpsabi"

// 16 floats as one value: each RLX_CPU_CLONES variant compiles its arithmetic
// to that variant's widest vectors (one zmm, two ymm or four xmm).
using f32x16 = float __attribute__((vector_size(64)));
RLX_CPU_INLINE f32x16 load16(const float* p) {
  f32x16 v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
RLX_CPU_INLINE void store16(float* p, f32x16 v) { std::memcpy(p, &v, sizeof v); }

// c[r][x] = sum_k a[r][k] b[k][x] for an R x 32 tile: the tile's sums stay
// in registers and each row of b is loaded once for the R rows of a.
template <int R>
RLX_CPU_INLINE void tile_x32(const float* a, int64_t lda, const float* b, int64_t ldb, int64_t kn, float* c,
                             int64_t ldc) {
  f32x16 acc[R][2] = {};
  for (int64_t k = 0; k < kn; ++k) {
    const f32x16 b0 = load16(b + k * ldb), b1 = load16(b + k * ldb + 16);
    for (int r = 0; r < R; ++r) {
      const float ar = a[r * lda + k];
      acc[r][0] += ar * b0;
      acc[r][1] += ar * b1;
    }
  }
  for (int r = 0; r < R; ++r) {
    store16(c + r * ldc, acc[r][0]);
    store16(c + r * ldc + 16, acc[r][1]);
  }
}

RLX_CPU_INLINE void tile_any(int64_t rows, int64_t cols, const float* a, int64_t lda, const float* b, int64_t ldb,
                     int64_t kn, float* c, int64_t ldc) {
  for (int64_t r = 0; r < rows; ++r) {
    float* cr = c + r * ldc;
    for (int64_t x = 0; x < cols; ++x) cr[x] = 0.f;
    for (int64_t k = 0; k < kn; ++k) {
      const float ar = a[r * lda + k];
      const float* bk = b + k * ldb;
      for (int64_t x = 0; x < cols; ++x) cr[x] += ar * bk[x];
    }
  }
}

// c (m x n, row length ldc) = a (m x kn) . b (kn x n) in 8 x 32 register
// tiles (16 sums, 2 loads of b for 16 products), then 4 x 32; every sum over
// k in order, whichever tile computes it.
RLX_CPU_INLINE void small_gemm(int64_t m, int64_t n, int64_t kn, const float* a, int64_t lda, const float* b,
                       int64_t ldb, float* c, int64_t ldc) {
  constexpr int C = 32;
  int64_t i = 0;
  for (; i + 8 <= m; i += 8) {
    int64_t x = 0;
    for (; x + C <= n; x += C) tile_x32<8>(a + i * lda, lda, b + x, ldb, kn, c + i * ldc + x, ldc);
    if (x < n) tile_any(8, n - x, a + i * lda, lda, b + x, ldb, kn, c + i * ldc + x, ldc);
  }
  for (; i + 4 <= m; i += 4) {
    int64_t x = 0;
    for (; x + C <= n; x += C) tile_x32<4>(a + i * lda, lda, b + x, ldb, kn, c + i * ldc + x, ldc);
    if (x < n) tile_any(4, n - x, a + i * lda, lda, b + x, ldb, kn, c + i * ldc + x, ldc);
  }
  if (i < m) tile_any(m - i, n, a + i * lda, lda, b, ldb, kn, c + i * ldc, ldc);
}

// The padding mask row of one sequence, or null when it keeps none of its
// keys: such a sequence attends to every key (softmax over no key has no
// answer; Hugging Face unmasks these rows for SDPA, and cuDNN gives NaN).
const int32_t* padding_keep(const int32_t* row, int64_t skv) {
  return std::any_of(row, row + skv, [](int32_t m) { return m != 0; }) ? row : nullptr;
}

// Row i's scores si [skv] in place into its softmax weights: soft capped
// (softcap > 0), masked (key j is kept when keep[j] != 0, j <= i +
// causal_shift and, with a window, j > i + causal_shift - window); all zero
// when every key is masked. keep may be null.
RLX_CPU_INLINE void softmax_scores(float* si, int64_t i, const int32_t* keep, int64_t causal_shift, int64_t window,
                                   float softcap, int64_t skv) {
  if (softcap > 0.f)
    for (int64_t j = 0; j < skv; ++j) si[j] = softcap * std::tanh(si[j] / softcap);
  // Keys >= last are causally masked (none when causal_shift >= skv).
  const int64_t last = std::clamp<int64_t>(i + causal_shift + 1, 0, skv);
  for (int64_t j = last; j < skv; ++j) si[j] = kMasked;
  // Keys < first are outside the window (the query sits at i + causal_shift).
  const int64_t first = window > 0 ? std::clamp<int64_t>(i + causal_shift - window + 1, 0, skv) : 0;
  for (int64_t j = 0; j < first; ++j) si[j] = kMasked;
  if (keep)
    for (int64_t j = 0; j < skv; ++j) si[j] = keep[j] != 0 ? si[j] : kMasked;
  // The largest score, 16 lanes at a time (a max is exact in any order; a
  // NaN score is passed over as the one-lane loop would).
  f32x16 top;
  for (int l = 0; l < 16; ++l) top[l] = kMasked;
  const int64_t skv16 = skv - skv % 16;
  for (int64_t j = 0; j < skv16; j += 16) {
    const f32x16 v = load16(si + j);
    top = v > top ? v : top;
  }
  float mx = kMasked;
  for (int l = 0; l < 16; ++l) mx = top[l] > mx ? top[l] : mx;
  for (int64_t j = skv16; j < skv; ++j) mx = si[j] > mx ? si[j] : mx;
  if (mx == kMasked) {  // every key masked: zero weights give a zero row
    for (int64_t j = 0; j < skv; ++j) si[j] = 0.f;
    return;
  }
  for (int64_t j = 0; j < skv; ++j) si[j] = exp_approx(si[j] - mx);  // exp(-inf - mx) is 0: masked keys drop out
  // The sum in 16 lanes (key j into lane j % 16), then the lanes in order: a
  // fixed order that vectorizes, where one running sum is a serial chain.
  f32x16 lanes = {};
  for (int64_t j = 0; j < skv16; j += 16) lanes += load16(si + j);
  for (int64_t j = skv16; j < skv; ++j) lanes[j - skv16] += si[j];
  float sum = 0.f;
  for (int l = 0; l < 16; ++l) sum += lanes[l];
  const float inv = 1.f / sum;  // normalize the weights, not the outputs: hd < skv multiplies
  for (int64_t j = 0; j < skv; ++j) si[j] *= inv;
}

// rows x skv scores of q (rows x hd, pre-scaled) against the first skv keys
// of kt (hd rows of ldk), their softmax weights (softmax_scores), then .V
// into out (rows x hd).
RLX_CPU_CLONES void attend_block(const float* q, const float* kt, int64_t ldk, const float* v, const int32_t* keep,
                                 int64_t causal_shift, int64_t window, float softcap, int64_t rows, int64_t hd,
                                 int64_t skv, float* s, float* out) {
  small_gemm(rows, skv, hd, q, hd, kt, ldk, s, skv);
  for (int64_t i = 0; i < rows; ++i) softmax_scores(s + i * skv, i, keep, causal_shift, window, softcap, skv);
  small_gemm(rows, hd, skv, s, skv, v, hd, out, hd);
}

// A 16 x 16 block of floats transposed in registers: r[l][d] becomes r[d][l].
// Four butterflies, each swapping one bit of the row index with the same bit
// of the column index (two-source shuffles: one permute each on AVX-512).
// Lane c of the low result: a's lane c, or b's c - S where bit S of c is
// set; of the high result: a's c + S, or b's lane c (b's lanes numbered
// from 16, as __builtin_shufflevector, which GCC and clang both have, counts).
template <int S, size_t... C> RLX_CPU_INLINE f32x16 butterfly_lo(f32x16 a, f32x16 b, std::index_sequence<C...>) {
  return __builtin_shufflevector(a, b, ((int(C) & S) ? 16 + int(C) - S : int(C))...);
}
template <int S, size_t... C> RLX_CPU_INLINE f32x16 butterfly_hi(f32x16 a, f32x16 b, std::index_sequence<C...>) {
  return __builtin_shufflevector(a, b, ((int(C) & S) ? 16 + int(C) : int(C) + S)...);
}
template <int S> RLX_CPU_INLINE void butterfly16(f32x16* r) {
  for (int i = 0; i < 16; ++i)
    if ((i & S) == 0) {
      const f32x16 a = r[i], b = r[i + S];
      r[i] = butterfly_lo<S>(a, b, std::make_index_sequence<16>());
      r[i + S] = butterfly_hi<S>(a, b, std::make_index_sequence<16>());
    }
}
RLX_CPU_INLINE void transpose16(f32x16* r) {
  butterfly16<8>(r);
  butterfly16<4>(r);
  butterfly16<2>(r);
  butterfly16<1>(r);
}

// Rows of a few queries (a decode step: the sq rows of each query head that
// shares this key/value head, row r at query index r % sq) against f32 keys
// and values read where they are (rows k + j * k_stride, v + j * v_stride),
// so nothing the size of the cache is copied (copying K transposed and V
// widened per head cost more than the products at one query row). Keys are
// taken 16 at a time and 16 dimensions at a time, transposed in registers,
// every query row's 16 scores summed over d in order; values are summed key
// by key into outputs held in registers. Every score and output is summed in
// the order attend_block sums it, so a decode step gives the bits a
// recompute gives.
constexpr int64_t kScoreRows = 4;  // query rows whose sums share one transposed block

// Where key (or value) column j of one sequence's head lies: row j of a
// cache, or in a ring of `ring` rows the row (first + j) mod ring (first <
// ring, and no more than ring columns are read).
struct KeyRows {
  const float* base;
  int64_t stride;
  int64_t first = 0, ring = 0;
  RLX_CPU_INLINE const float* row(int64_t j) const {
    if (ring == 0) return base + j * stride;
    const int64_t r = first + j;
    return base + (r >= ring ? r - ring : r) * stride;
  }
  KeyRows at_column(int64_t c) const { return {base + c, stride, first, ring}; }
};

// R query rows' scores against keys [j0, j0 + n) (n <= 16): fixed counts, so
// the sums stay in registers.
template <int R>
RLX_CPU_INLINE void score_rows(const float* q, const KeyRows& k, int64_t hd, int64_t j0, int64_t n, float* s,
                               int64_t skv) {
  f32x16 acc[R] = {};
  f32x16 t[16];
  const int64_t hd16 = hd - hd % 16;
  for (int64_t d0 = 0; d0 < hd16; d0 += 16) {
    for (int64_t l = 0; l < 16; ++l)  // keys past the last repeat it: nothing read past the cache
      t[l] = load16(k.row(j0 + std::min(l, n - 1)) + d0);
    transpose16(t);
    for (int r = 0; r < R; ++r)
      for (int d = 0; d < 16; ++d) acc[r] += q[r * hd + d0 + d] * t[d];
  }
  if (hd16 < hd) {  // the last hd % 16 dimensions, zero-padded
    for (int64_t l = 0; l < 16; ++l) {
      const float* kl = k.row(j0 + std::min(l, n - 1));
      t[l] = f32x16{};
      for (int64_t d = hd16; d < hd; ++d) t[l][d - hd16] = kl[d];
    }
    transpose16(t);
    for (int r = 0; r < R; ++r)
      for (int64_t d = hd16; d < hd; ++d) acc[r] += q[r * hd + d] * t[d - hd16];
  }
  for (int r = 0; r < R; ++r)
    for (int64_t l = 0; l < n; ++l) s[r * skv + j0 + l] = acc[r][l];
}

// Scores of nh heads' rows (head i's rows at q + i * rows * hd, its keys at
// k + i * hd, its scores at s + i * rows * skv), key tile by key tile with
// every head inside: a tile's cache rows are read once, whole.
RLX_CPU_INLINE void direct_scores(const float* q, const KeyRows& k, int64_t nh, int64_t rows, int64_t hd,
                                  int64_t skv, float* s) {
  for (int64_t j0 = 0; j0 < skv; j0 += 16) {
    const int64_t n = std::min<int64_t>(16, skv - j0);
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t r0 = 0; r0 < rows; r0 += kScoreRows) {
        const float* qr = q + (h * rows + r0) * hd;
        const KeyRows kh = k.at_column(h * hd);
        float* sr = s + (h * rows + r0) * skv;
        switch (std::min(kScoreRows, rows - r0)) {
          case 1: score_rows<1>(qr, kh, hd, j0, n, sr, skv); break;
          case 2: score_rows<2>(qr, kh, hd, j0, n, sr, skv); break;
          case 3: score_rows<3>(qr, kh, hd, j0, n, sr, skv); break;
          default: score_rows<4>(qr, kh, hd, j0, n, sr, skv); break;
        }
      }
  }
}

// R rows of out [d0, d0 + 16 C) += s . v over keys [j0, j1), in registers
// (from zero when j0 is 0): each sum runs over j in order from zero, whatever
// the key ranges.
template <int R, int C>
RLX_CPU_INLINE void value_rows(const float* s, int64_t skv, const KeyRows& v, int64_t hd, int64_t d0, int64_t j0,
                               int64_t j1, float* out) {
  f32x16 acc[R][C] = {};
  if (j0 > 0)
    for (int r = 0; r < R; ++r)
      for (int c = 0; c < C; ++c) acc[r][c] = load16(out + r * hd + d0 + 16 * c);
  for (int64_t j = j0; j < j1; ++j) {
    f32x16 vj[C];
    const float* vr = v.row(j);
    for (int c = 0; c < C; ++c) vj[c] = load16(vr + d0 + 16 * c);
    for (int r = 0; r < R; ++r) {
      const float w = s[r * skv + j];
      for (int c = 0; c < C; ++c) acc[r][c] += w * vj[c];
    }
  }
  for (int r = 0; r < R; ++r)
    for (int c = 0; c < C; ++c) store16(out + r * hd + d0 + 16 * c, acc[r][c]);
}

template <int R>
RLX_CPU_INLINE void value_rows_all(const float* s, int64_t skv, const KeyRows& v, int64_t hd, int64_t j0, int64_t j1,
                                   float* out) {
  const int64_t hd16 = hd - hd % 16;
  int64_t d0 = 0;
  for (; d0 + 64 <= hd16; d0 += 64) value_rows<R, 4>(s, skv, v, hd, d0, j0, j1, out);
  for (; d0 < hd16; d0 += 16) value_rows<R, 1>(s, skv, v, hd, d0, j0, j1, out);
  for (int r = 0; r < R; ++r)  // the last hd % 16 dimensions
    for (int64_t d = hd16; d < hd; ++d) {
      float a = j0 > 0 ? out[r * hd + d] : 0.f;
      for (int64_t j = j0; j < j1; ++j) a += s[r * skv + j] * v.row(j)[d];
      out[r * hd + d] = a;
    }
}

// out = s . v for nh heads (head i's weights at s + i * rows * skv, values
// at v + i * hd, outputs at out + i * rows * hd), 64 keys at a time with
// every head inside, so a tile's cache rows are read once, whole.
RLX_CPU_INLINE void direct_values(const float* s, int64_t skv, const KeyRows& v, int64_t nh, int64_t rows, int64_t hd,
                                  float* out) {
  constexpr int64_t kKeys = 64;
  if (skv == 0)
    for (int64_t i = 0; i < nh * rows * hd; ++i) out[i] = 0.f;
  for (int64_t j0 = 0; j0 < skv; j0 += kKeys) {
    const int64_t j1 = std::min(skv, j0 + kKeys);
    for (int64_t h = 0; h < nh; ++h)
      for (int64_t r0 = 0; r0 < rows; r0 += 4) {
        const float* sr = s + (h * rows + r0) * skv;
        const KeyRows vh = v.at_column(h * hd);
        float* o = out + (h * rows + r0) * hd;
        switch (std::min<int64_t>(4, rows - r0)) {
          case 1: value_rows_all<1>(sr, skv, vh, hd, j0, j1, o); break;
          case 2: value_rows_all<2>(sr, skv, vh, hd, j0, j1, o); break;
          case 3: value_rows_all<3>(sr, skv, vh, hd, j0, j1, o); break;
          default: value_rows_all<4>(sr, skv, vh, hd, j0, j1, o); break;
        }
      }
  }
}

RLX_CPU_CLONES void attend_rows_direct(const float* q, const KeyRows& k, const KeyRows& v, int64_t nh,
                                       const int32_t* keep, int64_t causal_shift, int64_t window, float softcap,
                                       int64_t rows, int64_t sq, int64_t hd, int64_t skv, float* s, float* out) {
  direct_scores(q, k, nh, rows, hd, skv, s);
  for (int64_t i = 0; i < nh * rows; ++i)
    softmax_scores(s + i * skv, (i % rows) % sq, keep, causal_shift, window, softcap, skv);
  direct_values(s, skv, v, nh, rows, hd, out);
}

// Query row i of sequence b, heads [h0, h0 + heads): rotated where a RoPE
// is fused in (the angles taken once for all of them), then scaled, head j
// into qf + j * qf_stride [hd] (f32).
template <class T>
void scaled_queries(const T* q, const AttentionParams& p, int64_t b, int64_t h0, int64_t heads, int64_t i,
                    const int32_t* q_pos, float* qf, int64_t qf_stride) {
  const int64_t hd = p.head_dim, half = p.q_rope_n_rot / 2;
  float c[128], s[128];  // head_dim <= 256 (checked when a rotation is fused in)
  if (half > 0)
    rope_angles(0, half, p.q_rope_n_rot, p.q_rope_theta, double(q_pos[b]) + double(i), p.q_rope_freqs, c, s);
  for (int64_t j = 0; j < heads; ++j) {
    const T* qr = q + (b * p.sq + i) * p.q_stride + p.q_offset + (h0 + j) * hd;
    T rotated[256];
    if (half > 0) {
      rope_pairs(qr, rotated, 0, half, half, p.q_rope_interleaved, c, s);
      for (int64_t d = 2 * half; d < hd; ++d) rotated[d] = qr[d];
      qr = rotated;
    }
    float* out = qf + j * qf_stride;
    for (int64_t d = 0; d < hd; ++d) out[d] = to_f32(qr[d]) * p.scale;
  }
}

// What one sequence b of the batch attends to: key columns [0, kv_len),
// column j the key at position first + j.
struct SequenceKeys {
  int64_t kv_len;        // keys valid (with query positions: those before pos[b] + sq)
  int64_t causal_shift;  // query i sits at key i + causal_shift
  const int32_t* keep;   // its padding mask, or null
  int64_t kb;            // its row of the cache (a ragged batch's slot)
  int64_t first = 0;     // a ring's first key read (0 otherwise)
  int64_t ring = 0;      // a ring's rows (0: not a ring)
  // Key column j at column offset c of a cache [*, skv, stride]: its row.
  template <class T> const T* row(const T* cache, int64_t skv, int64_t stride, int64_t c, int64_t j) const {
    return cache + (kb * skv + (ring ? (first + j) % ring : j)) * stride + c;
  }
  KeyRows rows(const float* cache, int64_t skv, int64_t stride, int64_t c) const {
    return {cache + kb * skv * stride + c, stride, ring ? first % ring : 0, ring};
  }
};
SequenceKeys sequence_keys(const AttentionParams& p, int64_t b, const int32_t* q_pos, const int32_t* mask,
                           const int32_t* kv_slots) {
  SequenceKeys s;
  // With query positions (a KV cache) only keys before pos[b] + sq are
  // valid, and causal keeps key j for query i when j <= pos[b] + i.
  s.kv_len = q_pos ? std::clamp<int64_t>(int64_t(q_pos[b]) + p.sq, 0, p.skv) : p.skv;
  s.causal_shift = p.mask_kind != MaskKind::Causal ? s.kv_len : q_pos ? int64_t(q_pos[b]) : p.skv - p.sq;
  // A two-sided window |i - j| < w is the causal window of 2w - 1 keys ending
  // w - 1 keys past the query (sq == skv, no positions: checked at build).
  if (p.mask_kind != MaskKind::Causal && p.window > 0) s.causal_shift = p.window - 1;
  s.keep = mask ? padding_keep(mask + b * p.skv, p.skv) : nullptr;
  // A ragged batch reads its sequence's cache slot (clamped: the host checks slots).
  s.kb = kv_slots ? std::clamp<int64_t>(kv_slots[b], 0, p.kv_batch - 1) : b;
  if (p.ring && q_pos) {
    // Keys from the first query's window start, rounded down to 32: the
    // columns line up with a full cache's (the margin of kv_ring_rows keeps
    // those rows unwritten since), so the sums are the same.
    const int64_t end = int64_t(q_pos[b]) + p.sq;
    s.first = std::max<int64_t>(0, int64_t(q_pos[b]) - p.window + 1) / kKvRingMargin * kKvRingMargin;
    s.kv_len = std::max<int64_t>(0, end - s.first);
    s.causal_shift = int64_t(q_pos[b]) - s.first;
    s.ring = p.skv;
  }
  return s;
}

// The keys a window spans as softmax_scores counts them: a causal window's
// own; a two-sided one's 2w - 1 (its causal_shift puts them around the query).
int64_t window_keys(const AttentionParams& p) {
  if (p.window <= 0) return 0;
  return p.mask_kind == MaskKind::Causal ? p.window : 2 * int64_t(p.window) - 1;
}

// A decode step in f32: one task per (batch, key/value head), every query
// head of its group against the cache in place (attend_rows_direct).
void attention_direct(const AttentionParams& p, CpuContext& ctx) {
  uint8_t* arena = ctx.arena();
  const float* q = at<float>(arena, p.q);
  const float* k = at<float>(arena, p.k);
  const float* v = at<float>(arena, p.v);
  const int32_t* mask = p.mask_kind == MaskKind::Padding ? at<int32_t>(arena, p.mask) : nullptr;
  float* out = at<float>(arena, p.out);
  const int64_t sq = p.sq, skv = p.skv, hd = p.head_dim, group = p.q_heads / p.kv_heads, rows = group * sq;
  const int threads = run_threads();
  // A task takes as many key/value heads as leave every thread one task:
  // the cache rows hold all heads side by side, and a task reading each
  // row whole streams the cache once (a head at a time read it a third
  // as densely, three times over, for three heads).
  const int64_t splits = std::clamp<int64_t>((threads + p.batch - 1) / p.batch, 1, p.kv_heads);
  const int64_t per_task = (p.kv_heads + splits - 1) / splits, tasks_per_seq = (p.kv_heads + per_task - 1) / per_task;
  const int64_t per_worker = per_task * rows * (2 * hd + skv);  // queries, scores, outputs
  float* buffers = ctx.scratch(0, size_t(threads * per_worker));
  const int32_t* q_pos = p.pos != kNoBuffer ? at<int32_t>(arena, p.pos) : nullptr;
  const int32_t* kv_slots = p.kv_slots != kNoBuffer ? at<int32_t>(arena, p.kv_slots) : nullptr;
  const int64_t window = window_keys(p);
  parallel_for_worker(p.batch * tasks_per_seq, threads, [&](int64_t task, int worker) {
    const int64_t b = task / tasks_per_seq, h0 = (task % tasks_per_seq) * per_task;
    const int64_t nh = std::min(per_task, p.kv_heads - h0);
    float* qf = buffers + worker * per_worker;
    float* s = qf + nh * rows * hd;
    float* of = s + nh * rows * skv;
    const SequenceKeys sk = sequence_keys(p, b, q_pos, mask, kv_slots);
    // Head h0 + i's query heads first, its rows (g, i) at qf + (i * rows + g * sq + i) * hd.
    for (int64_t i = 0; i < sq; ++i) scaled_queries(q, p, b, h0 * group, nh * group, i, q_pos, qf + i * hd, sq * hd);
    attend_rows_direct(qf, sk.rows(k, skv, p.k_stride, p.k_offset + h0 * hd),
                       sk.rows(v, skv, p.v_stride, p.v_offset + h0 * hd), nh, sk.keep, sk.causal_shift,
                       window, p.softcap, rows, sq, hd, sk.kv_len, s, of);
    for (int64_t g = 0; g < nh * group; ++g)
      for (int64_t i = 0; i < sq; ++i)
        std::copy(of + (g * sq + i) * hd, of + (g * sq + i + 1) * hd,
                  out + ((b * sq + i) * p.q_heads + h0 * group + g) * hd);
  });
}

template <class T> void attention(const AttentionParams& p, CpuContext& ctx) {
  if constexpr (std::is_same_v<T, float>) {
    // attend_rows_direct's key tile holds head_dim <= 256.
    if (p.sq <= kDirectRows && p.head_dim <= 256) return attention_direct(p, ctx);
  }
  uint8_t* arena = ctx.arena();
  const T* q = at<T>(arena, p.q);
  const T* k = at<T>(arena, p.k);
  const T* v = at<T>(arena, p.v);
  const int32_t* mask = p.mask_kind == MaskKind::Padding ? at<int32_t>(arena, p.mask) : nullptr;
  T* out = at<T>(arena, p.out);
  const int64_t sq = p.sq, skv = p.skv, hd = p.head_dim;
  const int group = p.q_heads / p.kv_heads;
  const int64_t rows = std::min(kRowBlock, sq);
  // Per worker: K^T, V, the block's scaled queries, scores and outputs.
  const int threads = run_threads();
  const int64_t per_worker = 2 * skv * hd + rows * hd + rows * skv + rows * hd;
  float* buffers = ctx.scratch(0, size_t(threads * per_worker));
  const int32_t* q_pos = p.pos != kNoBuffer ? at<int32_t>(arena, p.pos) : nullptr;
  const int32_t* kv_slots = p.kv_slots != kNoBuffer ? at<int32_t>(arena, p.kv_slots) : nullptr;
  // One task per (batch, head): its K and V are widened once for all its row blocks.
  parallel_for_worker(p.batch * p.q_heads, threads, [&](int64_t task, int worker) {
    float* kt = buffers + worker * per_worker;
    float* vf = kt + skv * hd;
    float* qf = vf + skv * hd;
    float* s = qf + rows * hd;
    float* of = s + rows * skv;
    const int64_t h = task % p.q_heads, b = task / p.q_heads, kvh = h / group;
    const SequenceKeys sk = sequence_keys(p, b, q_pos, mask, kv_slots);
    const int64_t kv_len = sk.kv_len;
    const int64_t window = window_keys(p);
    for (int64_t j = 0; j < kv_len; ++j) {
      const T* kr = sk.row(k, skv, p.k_stride, p.k_offset + kvh * hd, j);
      const T* vr = sk.row(v, skv, p.v_stride, p.v_offset + kvh * hd, j);
      for (int64_t d = 0; d < hd; ++d) {
        kt[d * kv_len + j] = to_f32(kr[d]);
        vf[j * hd + d] = to_f32(vr[d]);
      }
    }
    for (int64_t i0 = 0; i0 < sq; i0 += rows) {
      const int64_t n = std::min(rows, sq - i0);
      for (int64_t i = 0; i < n; ++i) scaled_queries(q, p, b, h, 1, i0 + i, q_pos, qf + i * hd, hd);
      // Keys past the block's last query are masked for all its rows: left
      // out, they change no sum (a masked key adds exactly 0), and a causal
      // prompt's blocks do half the work.
      const int64_t keys = std::clamp<int64_t>(sk.causal_shift + i0 + n, 0, kv_len);
      attend_block(qf, kt, kv_len, vf, sk.keep, sk.causal_shift + i0, window, p.softcap, n, hd, keys, s, of);
      for (int64_t i = 0; i < n; ++i) {
        T* o = out + ((b * sq + i0 + i) * p.q_heads + h) * hd;
        for (int64_t d = 0; d < hd; ++d) o[d] = from_f32<T>(of[i * hd + d]);
      }
    }
  });
}

}  // namespace

void register_cpu_attention(CpuRegistry& r) {
  r.add<AttentionParams>(DType::F32, attention<float>);
  r.add<AttentionParams>(DType::F16, attention<Half>);
  r.add<AttentionParams>(DType::BF16, attention<BFloat>);
}

}  // namespace rlx::cpu
