#include "backends/cpu/cpu_quant_dot.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <string>

#include "backends/cpu/cpu_quant_reduce.h"
#include "rlx/dtype.h"
#include "rlx/error.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define RLX_QUANT_X86 1
#define RLX_TARGET_VNNI __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512vnni,f16c,fma")))
#define RLX_TARGET_AVX2 __attribute__((target("avx2,fma,f16c")))
#endif

namespace rlx::cpu {
namespace {

constexpr int64_t kGroup = 4;         // blocks a group
constexpr int64_t kGroupBytes = 128;  // activation bytes a group
constexpr int32_t kDigit = 128;       // the first digit's weight in units of the second

// Where value j (0..31) of block t (0..3) of a group sits in the group's
// 128 activation bytes.
inline int64_t act_offset(bool four_bit, int64_t t, int64_t j) {
  if (!four_bit) return t * 32 + j;
  return j < 16 ? t * 16 + j : 64 + t * 16 + (j - 16);
}

// ---- plain C++ -------------------------------------------------------------

template <QuantType Q>
float dot_scalar(const uint8_t* wq, const uint16_t* ws, const Q8Activations& a, int64_t i) {
  const int8_t* xq = a.row_q(i);
  const int8_t* xr = a.row_r(i);
  const float* xd = a.row_d(i);
  const float* xs = a.row_s(i);
  float acc = 0.f;
  for (int64_t b = 0; b < a.blocks; ++b) {
    const int8_t* x = xq + (b / kGroup) * kGroupBytes;
    const int8_t* x2 = xr + (b / kGroup) * kGroupBytes;
    const int64_t t = b % kGroup;
    int32_t sum = 0, sum2 = 0;
    if constexpr (Q == QuantType::Q8_0) {
      const int8_t* w = reinterpret_cast<const int8_t*>(wq + b * 32);
      for (int j = 0; j < 32; ++j) {
        sum += int32_t(w[j]) * x[act_offset(false, t, j)];
        sum2 += int32_t(w[j]) * x2[act_offset(false, t, j)];
      }
      acc += half_to_float(ws[b]) * xd[b] * float(sum * kDigit + sum2);
    } else {
      const uint8_t* w = wq + b * 16;
      for (int j = 0; j < 16; ++j) {
        sum += int32_t(w[j] & 0x0f) * x[act_offset(true, t, j)] + int32_t(w[j] >> 4) * x[act_offset(true, t, j + 16)];
        sum2 += int32_t(w[j] & 0x0f) * x2[act_offset(true, t, j)] + int32_t(w[j] >> 4) * x2[act_offset(true, t, j + 16)];
      }
      sum = sum * kDigit + sum2;
      if constexpr (Q == QuantType::Q4_0) {
        const float d = half_to_float(ws[b]);
        acc += d * xd[b] * float(sum) - 8.f * d * xs[b];
      } else {
        const float d = half_to_float(ws[2 * b]), m = half_to_float(ws[2 * b + 1]);
        acc += d * xd[b] * float(sum) + m * xs[b];
      }
    }
  }
  return acc;
}

#ifdef RLX_QUANT_X86

// ---- AVX2: one block at a time, 32 values in a 256-bit register ------------

// Block t's 32 activation bytes of a 4-bit group: its first 16 values, then its last 16.
RLX_TARGET_AVX2 inline __m256i block_halves(const int8_t* group, int64_t t) {
  return _mm256_set_m128i(_mm_loadu_si128(reinterpret_cast<const __m128i*>(group + 64 + t * 16)),
                          _mm_loadu_si128(reinterpret_cast<const __m128i*>(group + t * 16)));
}

template <QuantType Q>
RLX_TARGET_AVX2 float dot_avx2(const uint8_t* wq, const uint16_t* ws, const Q8Activations& a, int64_t i) {
  const int8_t* xq = a.row_q(i);
  const int8_t* xr = a.row_r(i);
  const float* xd = a.row_d(i);
  const float* xs = a.row_s(i);
  const __m256i ones = _mm256_set1_epi16(1);
  __m256 acc = _mm256_setzero_ps();
  float mins = 0.f;
  for (int64_t b = 0; b < a.blocks; ++b) {
    const int64_t off = (b / kGroup) * kGroupBytes;
    const int64_t t = b % kGroup;
    __m256i u, v, v2;  // u unsigned, v and v2 (the two digits) signed: the operands of maddubs
    float d;
    if constexpr (Q == QuantType::Q8_0) {
      const __m256i w = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(wq + b * 32));
      const __m256i xv = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xq + off + t * 32));
      const __m256i xv2 = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(xr + off + t * 32));
      u = _mm256_sign_epi8(w, w);  // |w|
      v = _mm256_sign_epi8(xv, w);
      v2 = _mm256_sign_epi8(xv2, w);
      d = half_to_float(ws[b]);
    } else {
      const __m128i w = _mm_loadu_si128(reinterpret_cast<const __m128i*>(wq + b * 16));
      const __m128i low = _mm_set1_epi8(0x0f);
      u = _mm256_set_m128i(_mm_and_si128(_mm_srli_epi16(w, 4), low), _mm_and_si128(w, low));
      v = block_halves(xq + off, t);
      v2 = block_halves(xr + off, t);
      d = half_to_float(ws[Q == QuantType::Q4_1 ? 2 * b : b]);
      mins += (Q == QuantType::Q4_1 ? half_to_float(ws[2 * b + 1]) : -8.f * d) * xs[b];
    }
    // Pairs of u8 * s8 fit i16: 15 * 127 * 2 and 127 * 127 * 2 < 32767.
    const __m256i sum = _mm256_add_epi32(_mm256_slli_epi32(_mm256_madd_epi16(_mm256_maddubs_epi16(u, v), ones), 7),
                                         _mm256_madd_epi16(_mm256_maddubs_epi16(u, v2), ones));
    acc = _mm256_fmadd_ps(_mm256_set1_ps(d * xd[b]), _mm256_cvtepi32_ps(sum), acc);
  }
  const __m128 h = _mm_add_ps(_mm256_castps256_ps128(acc), _mm256_extractf128_ps(acc, 1));
  const __m128 q = _mm_add_ps(h, _mm_movehl_ps(h, h));
  return _mm_cvtss_f32(_mm_add_ss(q, _mm_movehdup_ps(q))) + mins;
}

// ---- AVX512-VNNI: a group of 4 blocks per step -----------------------------

// 4-bit weights: the group's 64 bytes of nibbles, low nibbles against the
// first 16 values of each block, high against the last 16; 128-bit lane t
// holds block t's sums. R rows of x at once share each weight load; every
// row's sums run in the same order whatever R is.
template <QuantType Q, int R>
RLX_TARGET_VNNI inline __attribute__((always_inline)) void dot_vnni_4bit(const uint8_t* wq, const uint16_t* ws, const Q8Activations& a, int64_t i0,
                                   float* out) {
  constexpr int kPer = Q == QuantType::Q4_1 ? 2 : 1;  // f16 per block in the scales
  const __m512i low = _mm512_set1_epi8(0x0f);
  // Lane l (block l / 4) takes scale 2 (l / 4) (Q4_1's d) or l / 4 (Q4_0's).
  const __m512i idx_d = _mm512_set_epi32(3 * kPer, 3 * kPer, 3 * kPer, 3 * kPer, 2 * kPer, 2 * kPer, 2 * kPer, 2 * kPer,
                                         kPer, kPer, kPer, kPer, 0, 0, 0, 0);
  const __m512i idx_m = _mm512_add_epi32(idx_d, _mm512_set1_epi32(1));
  __m512 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g * kGroup < a.blocks; ++g) {
    const int64_t nt = std::min<int64_t>(kGroup, a.blocks - g * kGroup);
    const uint8_t* wg = wq + g * 64;
    const uint16_t* sg = ws + g * kGroup * kPer;
    __m512i w;
    __m512 sc;  // the group's f16 scales (and mins) widened, in the low lanes
    if (nt == kGroup) {
      w = _mm512_loadu_si512(wg);
      sc = kPer == 2 ? _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(sg))))
                     : _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sg))));
    } else {  // the row's last blocks: nothing read past them
      w = _mm512_maskz_loadu_epi8(~0ull >> (64 - 16 * nt), wg);
      sc = _mm512_castps256_ps512(_mm256_cvtph_ps(_mm_maskz_loadu_epi16(__mmask8((1u << (nt * kPer)) - 1), sg)));
    }
    const __m512i lo = _mm512_and_si512(w, low), hi = _mm512_and_si512(_mm512_srli_epi16(w, 4), low);
    const __m512 d = _mm512_permutexvar_ps(idx_d, sc);
    const __m512 m = Q == QuantType::Q4_1 ? _mm512_permutexvar_ps(idx_m, sc) : _mm512_mul_ps(d, _mm512_set1_ps(-8.f));
    for (int r = 0; r < R; ++r) {
      const int8_t* xg = a.row_q(i0 + r) + g * kGroupBytes;
      const int8_t* xg2 = a.row_r(i0 + r) + g * kGroupBytes;
      __m512i sum = _mm512_dpbusd_epi32(_mm512_setzero_si512(), lo, _mm512_loadu_si512(xg));
      sum = _mm512_slli_epi32(_mm512_dpbusd_epi32(sum, hi, _mm512_loadu_si512(xg + 64)), 7);
      sum = _mm512_dpbusd_epi32(sum, lo, _mm512_loadu_si512(xg2));
      sum = _mm512_dpbusd_epi32(sum, hi, _mm512_loadu_si512(xg2 + 64));
      acc0[r] = _mm512_fmadd_ps(_mm512_mul_ps(d, _mm512_loadu_ps(a.row_dl(i0 + r) + g * 32)), _mm512_cvtepi32_ps(sum),
                                acc0[r]);
      acc1[r] = _mm512_fmadd_ps(m, _mm512_loadu_ps(a.row_sl(i0 + r) + g * 16), acc1[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = reduce_lanes(_mm512_add_ps(acc0[r], acc1[r]));
}

// Q8_0: two 64-byte loads a group (blocks 0-1, 2-3). VPDPBUSD multiplies
// u8 by s8, so each signed product is taken as (w + 128) * x (w + 128 is w
// with its top bit flipped), the accumulator starting at
// z = -(128 sum(qx) + sum(rx)) over the lane's 4 values (Q8Activations::zl):
// ((z + sum((w + 128) qx)) << 7) + sum((w + 128) rx) = 128 sum(w qx) + sum(w rx),
// the exact integer of the digits, as the tiled kernel computes it.
template <int R>
RLX_TARGET_VNNI inline __attribute__((always_inline)) void dot_vnni_q8_0(const uint8_t* wq, const uint16_t* ws, const Q8Activations& a, int64_t i0,
                                   float* out) {
  const __m512i flip = _mm512_set1_epi8(char(0x80));
  const __m512i idx0 = _mm512_set_epi32(1, 1, 1, 1, 1, 1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0);
  const __m512i idx1 = _mm512_set_epi32(3, 3, 3, 3, 3, 3, 3, 3, 2, 2, 2, 2, 2, 2, 2, 2);
  __m512 acc0[R], acc1[R];
  for (int r = 0; r < R; ++r) acc0[r] = acc1[r] = _mm512_setzero_ps();
  for (int64_t g = 0; g * kGroup < a.blocks; ++g) {
    const int64_t nt = std::min<int64_t>(kGroup, a.blocks - g * kGroup);
    const uint8_t* wg = wq + g * 128;
    const uint16_t* sg = ws + g * kGroup;
    __m512i w0, w1;
    __m512 sc;
    if (nt == kGroup) {
      w0 = _mm512_loadu_si512(wg);
      w1 = _mm512_loadu_si512(wg + 64);
      sc = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(sg))));
    } else {  // past the row's end: w = 0 against x = 0
      const int64_t bytes = 32 * nt;
      w0 = _mm512_maskz_loadu_epi8(~0ull >> (64 - std::min<int64_t>(64, bytes)), wg);
      w1 = bytes > 64 ? _mm512_maskz_loadu_epi8(~0ull >> (128 - bytes), wg + 64) : _mm512_setzero_si512();
      sc = _mm512_castps128_ps512(_mm_cvtph_ps(_mm_maskz_loadu_epi16(__mmask8((1u << nt) - 1), sg)));
    }
    const __m512i u0 = _mm512_xor_si512(w0, flip), u1 = _mm512_xor_si512(w1, flip);
    const __m512 d0 = _mm512_permutexvar_ps(idx0, sc), d1 = _mm512_permutexvar_ps(idx1, sc);
    for (int r = 0; r < R; ++r) {
      const int8_t* xg = a.row_q(i0 + r) + g * kGroupBytes;
      const int8_t* xg2 = a.row_r(i0 + r) + g * kGroupBytes;
      const int32_t* z = a.row_zl(i0 + r) + g * 32;
      const float* xd = a.row_dl(i0 + r) + g * 32;
      __m512i s0 = _mm512_dpbusd_epi32(_mm512_loadu_si512(z), u0, _mm512_loadu_si512(xg));
      __m512i s1 = _mm512_dpbusd_epi32(_mm512_loadu_si512(z + 16), u1, _mm512_loadu_si512(xg + 64));
      s0 = _mm512_dpbusd_epi32(_mm512_slli_epi32(s0, 7), u0, _mm512_loadu_si512(xg2));
      s1 = _mm512_dpbusd_epi32(_mm512_slli_epi32(s1, 7), u1, _mm512_loadu_si512(xg2 + 64));
      acc0[r] = _mm512_fmadd_ps(_mm512_mul_ps(d0, _mm512_loadu_ps(xd)), _mm512_cvtepi32_ps(s0), acc0[r]);
      acc1[r] = _mm512_fmadd_ps(_mm512_mul_ps(d1, _mm512_loadu_ps(xd + 16)), _mm512_cvtepi32_ps(s1), acc1[r]);
    }
  }
  for (int r = 0; r < R; ++r) out[r] = reduce_lanes(_mm512_add_ps(acc0[r], acc1[r]));
}

// Weight rows [r0, r1), each against every row of x, 4, 2 or 1 rows of x
// at a time; the kernels inlined into one loop per format.
template <QuantType Q, int R>
RLX_TARGET_VNNI inline __attribute__((always_inline)) void dot_vnni(const uint8_t* wq, const uint16_t* ws,
                                                                    const Q8Activations& a, int64_t i0, float* out) {
  if constexpr (Q == QuantType::Q8_0) dot_vnni_q8_0<R>(wq, ws, a, i0, out);
  else dot_vnni_4bit<Q, R>(wq, ws, a, i0, out);
}
template <QuantType Q>
RLX_TARGET_VNNI void product_vnni(const QuantRows& w, int64_t r0, int64_t r1, const Q8Activations& a, float* y,
                                  int64_t ldy) {
  float t[4];
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* wq = w.quants + r * w.row_bytes;
    const uint16_t* ws = w.scales + r * w.row_scales;
    if (a.m == 1) {
      dot_vnni<Q, 1>(wq, ws, a, 0, y + r);
      continue;
    }
    int64_t i = 0;
    for (; i + 4 <= a.m; i += 4) {
      dot_vnni<Q, 4>(wq, ws, a, i, t);
      for (int j = 0; j < 4; ++j) y[(i + j) * ldy + r] = t[j];
    }
    if (i + 2 <= a.m) {
      dot_vnni<Q, 2>(wq, ws, a, i, t);
      y[i * ldy + r] = t[0];
      y[(i + 1) * ldy + r] = t[1];
      i += 2;
    }
    if (i < a.m) {
      dot_vnni<Q, 1>(wq, ws, a, i, t);
      y[i * ldy + r] = t[0];
    }
  }
}

#endif  // RLX_QUANT_X86

std::atomic<int> g_kernel{-1};  // the kernel set or chosen; -1: not yet
std::atomic<uint64_t> g_calls[4];

QuantKernel best_kernel() {
  if (quant_kernel_runs(QuantKernel::Avx512Vnni)) return QuantKernel::Avx512Vnni;
  if (quant_kernel_runs(QuantKernel::Avx2)) return QuantKernel::Avx2;
  return QuantKernel::Scalar;
}

}  // namespace

const char* quant_kernel_name(QuantKernel k) {
  switch (k) {
    case QuantKernel::F32: return "f32";
    case QuantKernel::Scalar: return "scalar";
    case QuantKernel::Avx2: return "avx2";
    case QuantKernel::Avx512Vnni: return "avx512-vnni";
  }
  return "unknown";
}

#ifdef RLX_QUANT_X86
// From CPUID (clang 14's __builtin_cpu_supports knows neither "avx512vnni"
// nor "f16c"): leaf 7 ECX bit 11, leaf 1 ECX bit 29.
bool has_avx512_vnni() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid_count(7, 0, &a, &b, &c, &d) && (c & (1u << 11)) != 0;
}
bool has_f16c() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(1, &a, &b, &c, &d) && (c & (1u << 29)) != 0;
}
#endif

// CPUID traps to the hypervisor in a virtual machine (microseconds): asked
// once, not at every product.
bool quant_kernel_runs(QuantKernel k) {
#ifdef RLX_QUANT_X86
  static const bool vnni = __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
                           __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
                           has_avx512_vnni();
  static const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c();
  if (k == QuantKernel::Avx512Vnni) return vnni;
  if (k == QuantKernel::Avx2) return avx2;
#else
  if (k == QuantKernel::Avx512Vnni || k == QuantKernel::Avx2) return false;
#endif
  return true;
}

uint64_t quant_kernel_calls(QuantKernel k) { return g_calls[int(k)].load(); }
void count_quant_kernel_call(QuantKernel k) { g_calls[int(k)].fetch_add(1, std::memory_order_relaxed); }

void set_quant_kernel(QuantKernel k) {
  RLX_CHECK(quant_kernel_runs(k), "matmul_q: this processor cannot run the " << quant_kernel_name(k) << " kernel");
  g_kernel.store(int(k));
}

QuantKernel quant_kernel() {
  const int k = g_kernel.load(std::memory_order_relaxed);
  if (k >= 0) return QuantKernel(k);
  // The best integer kernel by default: with two-digit activations the
  // products stay within dx / 256 per value of the f32 product (one digit
  // turned SmolLM2-135M Q4_1's chat answer to word salad).
  QuantKernel chosen = best_kernel();
  if (const char* v = std::getenv("RLX_CPU_QUANT_KERNEL"); v && *v && std::string(v) != "auto") {
    bool known = false;
    for (QuantKernel c : {QuantKernel::F32, QuantKernel::Scalar, QuantKernel::Avx2, QuantKernel::Avx512Vnni})
      if (std::string(v) == quant_kernel_name(c)) {
        chosen = c;
        known = true;
      }
    RLX_CHECK(known, "RLX_CPU_QUANT_KERNEL=" << v << ": not one of auto, f32, scalar, avx2, avx512-vnni");
  }
  set_quant_kernel(chosen);
  return chosen;
}

namespace {

// Block b's per-lane copies and, for its row's last group, the padding past
// the last block: every byte of a row's arrays is written, none zeroed first.
inline void block_lanes(bool four_bit, int64_t b, float unit, int32_t sum, float* d, float* s, float* dl, float* sl,
                        int32_t* c) {
  d[b] = unit;
  c[b] = sum;
  s[b] = unit * float(sum);
  const int64_t g = b / kGroup, t = b % kGroup;
  if (four_bit) {
    for (int l = 0; l < 4; ++l) dl[g * 32 + t * 4 + l] = unit;
  } else {
    for (int l = 0; l < 8; ++l) dl[g * 32 + t * 8 + l] = unit;
  }
  for (int l = 0; l < 4; ++l) sl[g * 16 + t * 4 + l] = s[b] / 4.f;
}

struct RowOut {
  int8_t *q, *q2;
  float *d, *s, *dl, *sl;
  int32_t* zl;  // Q8_0 only
  int32_t* c;
};

RowOut row_out(Q8Activations& a, int64_t i) {
  const bool four_bit = quant_is_4bit(a.weights);
  return {a.q.data() + i * a.groups * kGroupBytes, a.r.data() + i * a.groups * kGroupBytes,
          a.d.data() + i * a.groups * kGroup,      a.s.data() + i * a.groups * kGroup,
          a.dl.data() + i * a.groups * 32,         a.sl.data() + i * a.groups * 16,
          four_bit ? nullptr : a.zl.data() + i * a.groups * 32, a.c.data() + i * a.groups * kGroup};
}

// Zeros for blocks [blocks, groups * 4) of a row: the last group's padding.
void pad_row(const Q8Activations& a, bool four_bit, const RowOut& o) {
  for (int64_t b = a.blocks; b < a.groups * kGroup; ++b) {
    const int64_t g = b / kGroup, t = b % kGroup;
    for (int j = 0; j < kQuantBlock; ++j) {
      o.q[g * kGroupBytes + act_offset(four_bit, t, j)] = 0;
      o.q2[g * kGroupBytes + act_offset(four_bit, t, j)] = 0;
    }
    if (o.zl)
      for (int l = 0; l < 8; ++l) o.zl[g * 32 + t * 8 + l] = 0;
    block_lanes(four_bit, b, 0.f, 0, o.d, o.s, o.dl, o.sl, o.c);
  }
}

void quantize_row_scalar(const float* x, const Q8Activations& a, bool four_bit, const RowOut& o) {
  for (int64_t b = 0; b < a.blocks; ++b) {
    const float* xb = x + b * kQuantBlock;
    float amax = 0.f;
    bool finite = true;
    for (int j = 0; j < kQuantBlock; ++j) {
      amax = std::max(amax, std::fabs(xb[j]));
      finite &= std::fabs(xb[j]) <= 3.4e38f;  // false for NaN and inf, which max() would drop
    }
    if (!finite) amax = NAN;
    const float dx = amax / 127.f, id = dx != 0.f ? 1.f / dx : 0.f;
    const float unit = dx / float(kDigit);  // the second digit's step
    int32_t sum = 0;
    int8_t* qg = o.q + (b / kGroup) * kGroupBytes;
    int8_t* qg2 = o.q2 + (b / kGroup) * kGroupBytes;
    int32_t* zb = o.zl ? o.zl + (b / kGroup) * 32 + (b % kGroup) * 8 : nullptr;
    if (zb)
      for (int l = 0; l < 8; ++l) zb[l] = 0;
    for (int j = 0; j < kQuantBlock; ++j) {
      // Round to nearest even, as nearbyint, without the library call;
      // |x * id| <= 127 for finite blocks, NaN blocks give 0 (d is NaN).
      // The second digit rounds what the first left, |e| <= 1/2, in
      // steps of 1/128: |v2| <= 64.
      const float r = xb[j] * id;
      const int32_t v = finite ? int32_t(__builtin_lrintf(r)) : 0;
      const int32_t v2 = finite ? int32_t(__builtin_lrintf((r - float(v)) * float(kDigit))) : 0;
      qg[act_offset(four_bit, b % kGroup, j)] = int8_t(v);
      qg2[act_offset(four_bit, b % kGroup, j)] = int8_t(v2);
      sum += v * kDigit + v2;
      if (zb) zb[j / 4] -= v * kDigit + v2;
    }
    block_lanes(four_bit, b, unit, sum, o.d, o.s, o.dl, o.sl, o.c);
  }
}

#ifdef RLX_QUANT_X86
// The scalar loop's operations, 16 values a vector, in the same f32 order
// (the same bits): amax is exact in any order, the conversions round to
// nearest even as lrintf does under the default rounding mode.
RLX_TARGET_VNNI void quantize_row_avx512(const float* x, const Q8Activations& a, bool four_bit, const RowOut& o) {
  const __m512 limit = _mm512_set1_ps(3.4e38f), digit = _mm512_set1_ps(float(kDigit));
  for (int64_t b = 0; b < a.blocks; ++b) {
    const float* xb = x + b * kQuantBlock;
    const __m512 x0 = _mm512_loadu_ps(xb), x1 = _mm512_loadu_ps(xb + 16);
    const __m512 a0 = _mm512_abs_ps(x0), a1 = _mm512_abs_ps(x1);
    const bool finite = (_mm512_cmp_ps_mask(a0, limit, _CMP_LE_OQ) & _mm512_cmp_ps_mask(a1, limit, _CMP_LE_OQ)) == 0xffff;
    const float amax = finite ? _mm512_reduce_max_ps(_mm512_max_ps(a0, a1)) : NAN;
    const float dx = amax / 127.f, id = dx != 0.f ? 1.f / dx : 0.f;
    const float unit = dx / float(kDigit);
    __m512i v0 = _mm512_setzero_si512(), v1 = v0, w0 = v0, w1 = v0;
    if (finite) {
      const __m512 r0 = _mm512_mul_ps(x0, _mm512_set1_ps(id)), r1 = _mm512_mul_ps(x1, _mm512_set1_ps(id));
      v0 = _mm512_cvtps_epi32(r0);
      v1 = _mm512_cvtps_epi32(r1);
      w0 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_sub_ps(r0, _mm512_cvtepi32_ps(v0)), digit));
      w1 = _mm512_cvtps_epi32(_mm512_mul_ps(_mm512_sub_ps(r1, _mm512_cvtepi32_ps(v1)), digit));
    }
    const int64_t g = b / kGroup, t = b % kGroup;
    // Values 0-15 and 16-31: 4-bit weights split a block's halves (act_offset).
    int8_t* q = o.q + g * kGroupBytes;
    int8_t* q2 = o.q2 + g * kGroupBytes;
    const int64_t off0 = four_bit ? t * 16 : t * 32, off1 = four_bit ? 64 + t * 16 : t * 32 + 16;
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + off0), _mm512_cvtepi32_epi8(v0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q + off1), _mm512_cvtepi32_epi8(v1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q2 + off0), _mm512_cvtepi32_epi8(w0));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(q2 + off1), _mm512_cvtepi32_epi8(w1));
    const __m512i c0 = _mm512_add_epi32(_mm512_slli_epi32(v0, 7), w0);
    const __m512i c1 = _mm512_add_epi32(_mm512_slli_epi32(v1, 7), w1);
    const int32_t sum = _mm512_reduce_add_epi32(_mm512_add_epi32(c0, c1));
    if (o.zl) {
      // Lane l of the block: -(its 4 values' 128 v + w).
      alignas(64) int32_t c[32];
      _mm512_store_si512(c, c0);
      _mm512_store_si512(c + 16, c1);
      int32_t* zb = o.zl + g * 32 + t * 8;
      for (int l = 0; l < 8; ++l) zb[l] = -(c[4 * l] + c[4 * l + 1] + c[4 * l + 2] + c[4 * l + 3]);
    }
    block_lanes(four_bit, b, unit, sum, o.d, o.s, o.dl, o.sl, o.c);
  }
}
#endif

}  // namespace

void size_activations(int64_t m, int64_t k, QuantType weights, Q8Activations& a) {
  a.weights = weights;
  a.m = m;
  a.blocks = k / kQuantBlock;
  a.groups = (a.blocks + kGroup - 1) / kGroup;
  // Grow-only, not zeroed: the rows' quantization writes every element read.
  a.q.resize(size_t(m * a.groups * kGroupBytes));
  a.r.resize(size_t(m * a.groups * kGroupBytes));
  a.d.resize(size_t(m * a.groups * kGroup));
  a.s.resize(size_t(m * a.groups * kGroup));
  a.dl.resize(size_t(m * a.groups * 32));
  a.sl.resize(size_t(m * a.groups * 16));
  a.zl.resize(quant_is_4bit(weights) ? 0 : size_t(m * a.groups * 32));
  a.c.resize(size_t(m * a.groups * kGroup));
}

void quantize_activation_rows(const float* x, int64_t i0, int64_t i1, Q8Activations& a) {
  const bool four_bit = quant_is_4bit(a.weights);
  const int64_t k = a.blocks * kQuantBlock;
#ifdef RLX_QUANT_X86
  const bool vector = quant_kernel_runs(QuantKernel::Avx512Vnni);
#else
  const bool vector = false;
#endif
  for (int64_t i = i0; i < i1; ++i) {
    const RowOut o = row_out(a, i);
#ifdef RLX_QUANT_X86
    if (vector) quantize_row_avx512(x + i * k, a, four_bit, o);
    else quantize_row_scalar(x + i * k, a, four_bit, o);
#else
    (void)vector;
    quantize_row_scalar(x + i * k, a, four_bit, o);
#endif
    pad_row(a, four_bit, o);
  }
}

void quantize_activations(const float* x, int64_t m, int64_t k, QuantType weights, Q8Activations& a) {
  size_activations(m, k, weights, a);
  quantize_activation_rows(x, 0, m, a);
}

namespace {

// The one-row kernels over every (weight row, row of x).
template <float (*Dot)(const uint8_t*, const uint16_t*, const Q8Activations&, int64_t)>
void one_by_one(const QuantRows& w, int64_t r0, int64_t r1, const Q8Activations& a, float* y, int64_t ldy) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t i = 0; i < a.m; ++i) y[i * ldy + r] = Dot(w.quants + r * w.row_bytes, w.scales + r * w.row_scales, a, i);
}

}  // namespace

QuantProduct quant_product(QuantType t, QuantKernel k) {
  RLX_CHECK(k != QuantKernel::F32 && quant_kernel_runs(k),
            "matmul_q: no integer " << quant_kernel_name(k) << " kernel here");
  RLX_CHECK(t != QuantType::FP8, "matmul_q: fp8 weights have no integer kernel (the f32 one reads them)");
#ifdef RLX_QUANT_X86
  if (k == QuantKernel::Avx512Vnni) {
    if (t == QuantType::Q8_0) return product_vnni<QuantType::Q8_0>;
    return t == QuantType::Q4_0 ? product_vnni<QuantType::Q4_0> : product_vnni<QuantType::Q4_1>;
  }
  if (k == QuantKernel::Avx2) {
    if (t == QuantType::Q8_0) return one_by_one<dot_avx2<QuantType::Q8_0>>;
    return t == QuantType::Q4_0 ? one_by_one<dot_avx2<QuantType::Q4_0>> : one_by_one<dot_avx2<QuantType::Q4_1>>;
  }
#endif
  if (t == QuantType::Q8_0) return one_by_one<dot_scalar<QuantType::Q8_0>>;
  return t == QuantType::Q4_0 ? one_by_one<dot_scalar<QuantType::Q4_0>> : one_by_one<dot_scalar<QuantType::Q4_1>>;
}

}  // namespace rlx::cpu
