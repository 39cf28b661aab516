// Activations quantized per row (per token) for the int8 packed GEMM
// (cpu_gemm_packed.h gemm_packed_int8): one int8 digit per value,
// symmetric (scale = max |x| / 127, rounded to nearest even), stored as
// q + 128 because VPDPBUSD takes its first operand unsigned; the weights'
// column sums take the 128 back out.
#pragma once
#include <cstdint>

namespace rlx::cpu {

// Row length of the quantized form of k values: a multiple of 4 (a VPDPBUSD
// word), the bytes past k 128 (q = 0).
inline int64_t int8_row_bytes(int64_t k) { return (k + 3) / 4 * 4; }

// Rows [0, m) of A (k values, row length lda) into q (m x ld bytes,
// ld = int8_row_bytes(k)) and their scales; parallel over rows on up to
// `threads` of the run's pool. f32, f16 or bf16 A.
template <class T>
void quantize_rows_int8(const T* a, int64_t m, int64_t k, int64_t lda, uint8_t* q, float* scales, int threads);

}  // namespace rlx::cpu
