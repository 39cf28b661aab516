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

// Whether the library runs its AVX-512 kernels here. OpenBLAS picks its
// kernels by processor model when it loads and takes its AVX2 ("Haswell")
// ones on AVX-512 processors newer than it knows; those measured slower
// than the packed kernel and give a row different bits depending on where
// it sits in the product (the same sentence beside others would not embed
// to the same vector).
bool gemm_library_avx512();

}  // namespace rlx::cpu
