// rlx's own matrix-vector product for matmuls of few rows (decode steps),
// chosen over cuBLASLt per thunk by timing (see MatMulPlan).
#pragma once
#include <cstdint>

#include "backends/cuda/launch_context.h"
#include "rlx/graph.h"
#include "thunks/params.h"

namespace rlx::cuda {

constexpr int64_t kGemvMaxRows = kMatVecRows;
constexpr int64_t kGemvAlwaysRows = kMatMulFusedRows;  // taken without timing up to here (MatMulPlan)

// x [m, k] times W [n, k]^T (trans_b, row-major) with m <= kGemvMaxRows,
// rows of whole, 16-byte aligned chunks; bias, any activation and the
// MatVecFusionParams (norm before, residual after) fused.
bool gemv_eligible(const MatMulParams& p, const uint8_t* arena);
void run_gemv(const MatMulParams& p, const LaunchContext& ctx);

// Launches of a fused-norm product with the norm's gain staged in shared
// memory rather than registers (one or two rows; RLX_GEMV_GAMMA_SHARED=0
// turns it off): tests assert which variant ran.
int64_t gemv_gamma_shared_launches();

// How a product's output columns divide into tiles (one block's work):
// split tiles (gemv_split_tile, one column, the row in quarters) for long
// rows, else row tiles (gemv_row_tile, a column a warp); smem is the norm's
// gain staged in shared memory.
struct GemvTiles {
  bool split = false;
  int64_t tiles = 0;
  size_t smem = 0;
};
// A one-row product over constant f16/bf16 weights as a matrix-vector
// chain runs it (matvec_chain.h: one sequence, gain in shared memory, x
// prefetched): false where the chain has no tile for it.
bool gemv_chain_tiles(const MatMulParams& p, GemvTiles* out);

}  // namespace rlx::cuda
