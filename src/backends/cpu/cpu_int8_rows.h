// Activations quantized per row (per token) for the int8 packed GEMM
// (cpu_gemm_packed.h gemm_packed_int8): one 8-bit digit per value,
// asymmetric, as u8 (VPDPBUSD's unsigned operand): the row's range
// [min(0, min x), max(0, max x)] in 255 steps, and the zero point, the u8
// that stands for 0. A GELU's output (FFN down's input) is almost all >= 0,
// so this spends all 256 codes where a symmetric int8 would use half; the
// weights' column sums times the zero point take the offset back out.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>

namespace rlx::cpu {

// Row length of the quantized form of k values: a multiple of 4 (a VPDPBUSD
// word), the bytes past k the zero point.
inline int64_t int8_row_bytes(int64_t k) { return (k + 3) / 4 * 4; }

// The step and zero point of a row whose values lie in [lo, hi]:
// u8 = clamp(nearbyint(x * inv) + zero, 0, 255), x ~ scale * (u8 - zero).
struct Int8RowRange {
  float scale = 0.f, inv = 0.f;
  int32_t zero = 0;
};
inline Int8RowRange int8_row_range(float lo, float hi) {
  lo = std::min(lo, 0.f), hi = std::max(hi, 0.f);
  Int8RowRange r;
  r.scale = (hi - lo) / 255.f;
  r.inv = hi > lo ? 255.f / (hi - lo) : 0.f;
  r.zero = int32_t(std::clamp(std::nearbyint(-lo * r.inv), 0.f, 255.f));
  return r;
}

// Rows [0, m) of A (k values, row length lda) into q (m x ld bytes,
// ld = int8_row_bytes(k)), their scales and zero points; parallel over rows
// on up to `threads` of the run's pool. f32, f16 or bf16 A.
template <class T>
void quantize_rows_int8(const T* a, int64_t m, int64_t k, int64_t lda, uint8_t* q, float* scales, int32_t* zeros,
                        int threads);

}  // namespace rlx::cpu
