// The CPU backend's one f32 matrix product, row-major C = op(A) @ op(B),
// behind a function of its own so the library under it can change.
#pragma once
#include <cstdint>
#include <string>

namespace rlx::cpu {

// Which code gemm_f32 runs: our unpacked kernel for few rows against
// transposed weights (cpu_gemm_nt.h), else the library.
// RLX_GEMM_LIBRARY_ONLY=1 forces the library (for measurement).
enum class GemmPath { Unpacked, Library };
GemmPath gemm_path(bool trans_a, bool trans_b, int64_t m);

// C = op(A) @ op(B) on the path gemm_path picks; a library call runs on
// `threads` of the library's own threads (the backend passes 1: it splits
// products over its own pool, cpu_matmul.cc).
void gemm_f32(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda,
              const float* b, int64_t ldb, float* c, int64_t ldc, int threads);

// The library, its version and the processor kernel it chose, as RLX_TRACE
// prints it: "OpenBLAS 0.3.34 (scipy-openblas32), kernel SkylakeX".
std::string gemm_library();

}  // namespace rlx::cpu
