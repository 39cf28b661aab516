// The CPU backend's one f32 matrix product, row-major C = op(A) @ op(B),
// behind a function of its own so the library under it can change.
#pragma once
#include <cstdint>
#include <string>

#include "rlx/enums.h"

namespace rlx::cpu {

// One library call on `threads` of the library's own threads (the backend
// passes 1: it splits products over its own pool, cpu_matmul.cc).
void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
              const float* b, int64_t ldb, float* c, int64_t ldc, int threads);

// C (m x n, row length ldc) = act(op(A) @ op(B) + bias) as single-threaded
// library calls, one per slice of C, split over `threads` of the backend's
// pool; each slice's bias and activation run while it is in cache.
void gemm_f32_sliced(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
                     const float* b, int64_t ldb, float* c, int64_t ldc, const float* bias, Activation act,
                     int threads);

// The library, its version and the processor kernel it chose, as RLX_TRACE
// prints it: "OpenBLAS 0.3.34 (scipy-openblas32), kernel SkylakeX".
std::string gemm_library();

}  // namespace rlx::cpu
