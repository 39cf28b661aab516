// The CPU backend's own f32 GEMM over weights packed once: C = op(A) @ B with
// B re-laid out (pack_weights) into panels of kPackedNR columns, each panel
// contiguous along k, so the micro-kernel streams it without the transposing
// copy a BLAS call makes of weights stored [N, K] on every call.
//
// Packed layout: panel p holds columns [p*NR, p*NR + NR) as
// panel[k * NR + j], panels one after another (each k * NR floats), columns
// past n zero. Any block of k of one panel is contiguous, so the kernel can
// block k at run time.
#pragma once
#include <cstdint>

#include "backends/cpu/cpu_storage.h"
#include "rlx/enums.h"

namespace rlx::cpu {

inline constexpr int64_t kPackedNR = 32;  // columns per panel: two 16-float vectors
inline constexpr int64_t kPackedMR = 12;  // rows of C per register tile

// True when this processor runs the packed kernel (AVX-512F); the backend
// uses the library otherwise.
bool packed_gemm_available();

// True when this processor runs the bf16 packed kernel (AVX512-BF16's
// VDPBF16PS: two products per f32 lane, twice the f32 kernel's rate) and
// RLX_CPU_BF16_GEMM is not 0.
bool packed_bf16_available();
// True when weights of this dtype are packed as bf16 pairs
// (pack_weights_bf16_pairs) rather than widened to f32: bf16 weights where
// the bf16 kernel runs.
bool packs_bf16_pairs(DType weights);

// True at the shapes where the packed kernel measured faster than the
// library (bench/cpu_gemm_shapes.cc, docs/PERF.md).
bool packed_gemm_wins(int64_t m, int64_t n, int64_t k);

// Floats of the packed form of an n x k operand.
inline int64_t packed_weights_floats(int64_t n, int64_t k) { return (n + kPackedNR - 1) / kPackedNR * kPackedNR * k; }

// Packs op(B) (k x n; B stored [n, k] when trans_b, else [k, n], row length
// ldb) into dst (packed_weights_floats(n, k) floats, 64-byte aligned),
// widening f16/bf16 to f32. Parallel over panels on the run's pool.
template <class T>
void pack_weights(const T* b, int64_t n, int64_t k, int64_t ldb, bool trans_b, float* dst);

// 32-bit words of the bf16-pair form of an n x k operand: panels of kPackedNR
// columns, each word two consecutive k of one column (low half first, an odd
// k's last paired with zero), words [k / 2][kPackedNR] per panel.
inline int64_t packed_bf16_words(int64_t n, int64_t k) {
  return (n + kPackedNR - 1) / kPackedNR * kPackedNR * ((k + 1) / 2);
}
void pack_weights_bf16_pairs(const BFloat* b, int64_t n, int64_t k, int64_t ldb, bool trans_b, uint32_t* dst);

// True when this processor runs the int8 packed kernel (AVX512-VNNI's
// VPDPBUSD: four u8 x s8 products per i32 lane, twice the bf16 kernel's
// rate).
bool packed_int8_available();
// The int8 form of an n x k operand, quantized symmetrically per column
// (scale = max |w| / 127): panels of kPackedNR columns, each 32-bit word four
// consecutive k of one column as int8 (lowest byte first, k past the end
// zero), words [(k + 3) / 4][kPackedNR] per panel; then, per column (n
// rounded up to a panel), its scale (f32), then the sum of its int8 values
// (i32: times a row's zero point, what that offset adds to its products).
inline int64_t packed_int8_quads(int64_t k) { return (k + 3) / 4; }
inline int64_t packed_int8_words(int64_t n, int64_t k) {
  const int64_t cols = (n + kPackedNR - 1) / kPackedNR * kPackedNR;
  return cols * packed_int8_quads(k) + 2 * cols;
}
struct PackedInt8 {
  const uint32_t* words = nullptr;
  const float* scales = nullptr;  // [n rounded up to a panel]
  const int32_t* sums = nullptr;  // sum_k q[k][j]
};
PackedInt8 packed_int8_parts(const uint32_t* packed, int64_t n, int64_t k);
template <class T>
void pack_weights_int8(const T* b, int64_t n, int64_t k, int64_t ldb, bool trans_b, uint32_t* dst);

// A quantized per row (cpu_int8_rows.h): row i's k values as u8 at
// q + i * ld (ld a multiple of 4, the bytes past k its zero point), its
// scale and zero point: a ~ scale * (u8 - zero).
struct Int8Rows {
  const uint8_t* q = nullptr;
  int64_t ld = 0;
  const float* scales = nullptr;
  const int32_t* zeros = nullptr;
};

// C (m x n, row length ldc) = act(op(A) @ B + bias) with B packed by
// pack_weights; op(A) is m x k (A stored [k, m] when trans_a). Bias and
// activation run on each register tile right after its last k block, while
// it is in cache. Split over `threads` of the pool by column panels, and by
// blocks of rows when there are many; every element's sum runs in the same
// order whatever the split, so results do not depend on the thread count.
void gemm_packed(bool trans_a, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* packed_b,
                 float* c, int64_t ldc, const float* bias, Activation act, int threads);
// Where the bf16 GEMM also narrows its result, while each tile is in cache:
// out = bf16(C + residual) (residual may be null), both with row length ld.
struct Bf16Output {
  BFloat* out = nullptr;
  const BFloat* residual = nullptr;
  int64_t ld = 0;
};
// The same over bf16 A and B packed by pack_weights_bf16_pairs: products of
// bf16 values summed in f32 (VDPBF16PS), C in f32 (and narrowed into
// `out.out` when set). Needs packed_bf16_available().
void gemm_packed_bf16(bool trans_a, int64_t m, int64_t n, int64_t k, const BFloat* a, int64_t lda,
                      const uint32_t* packed_b, float* c, int64_t ldc, const float* bias, Activation act,
                      int threads, const Bf16Output& out = {});


// C = act(A @ B + bias) with A quantized per row and B packed by
// pack_weights_int8: u8 x s8 products summed in i32 (VPDPBUSD), dequantized
// per row and column (scale_a[i] * scale_b[j] * (sum - zero_a[i] * sums[j]))
// in registers, with the bias, then the activation and (when `out.out` is
// set) the bf16 narrowing. Between k blocks C (f32) holds the i32 sums.
// Exact integer sums, so the result does not depend on k blocks or threads.
// Needs packed_int8_available().
void gemm_packed_int8(int64_t m, int64_t n, int64_t k, const Int8Rows& a, const uint32_t* packed_b, float* c,
                      int64_t ldc, const float* bias, Activation act, int threads, const Bf16Output& out = {});

}  // namespace rlx::cpu
