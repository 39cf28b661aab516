// C = A B^T for row-major A (m x k) and B (n x k: weights as stored), without
// packing either operand: at small m, OpenBLAS spent as long packing the
// weights on every call as multiplying them (43% vs 38% of MiniLM b1 s32).
#pragma once
#include <cstdint>

namespace rlx::cpu {

void gemm_nt_unpacked(int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb,
                      float* c, int64_t ldc);

}  // namespace rlx::cpu
