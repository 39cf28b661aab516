// matmul_q's many-row path on AVX512-VNNI for weights in the row layout
// (weights no thunk writes are interleaved instead, cpu_quant_rows16.h, and
// take that kernel for any number of rows): tiles of
// weight rows x rows of x (1 x 8 for 4-bit weights, 2 x 4 for Q8_0)
// accumulated in registers, the tile of x staying in L1 while the weight
// rows stream past it. The one-row kernel (cpu_quant_dot.cc) shares each
// weight load among 4 rows of x but reads those rows' 384 bytes a group from
// L2 again for every weight row, and the tile keeps its activations in one
// contiguous run: 1.3-1.6x the one-row kernel's rate for 128 rows.
//
// Every output is the same bits as the one-row kernel gives for that row
// alone: the same exact per-block integer sums (Q8_0 computes its signed
// products as (w + 128) * x with the x side's -128 * sum(x) folded into the
// accumulator's start, not as |w| * (x with w's sign)), the same f32
// accumulation per lane in the same order, the same lane reduction
// (cpu_quant_reduce.h).
#pragma once
#include <cstdint>
#include <vector>

#include "backends/cpu/cpu_quant_dot.h"

namespace rlx::cpu {

// Rows of x from which matmul_q takes the tiled path (with the AVX512-VNNI
// kernel); below it the one-row kernel, which loses nothing with few rows.
constexpr int64_t kQuantGemmRows = 16;

// x's rows repacked for the tiles: for each 4 rows (the last padded with
// zero rows) and each group of 4 blocks, one run of bytes holding the 4
// rows' first digits (128 bytes each), their second digits, then their
// per-lane u (Q8Activations::dl) and, for 4-bit weights, sx / 4 (sl) or,
// for Q8_0, the lanes' -(128 sum(q) + sum(r)) (zl): a tile reads one
// pointer at fixed offsets.
struct ActivationTiles {
  QuantType weights = QuantType::Q8_0;
  int64_t m = 0, blocks = 0, groups = 0, tile_bytes = 0;  // tile_bytes: one (4 rows, group) run
  std::vector<uint8_t> bytes;
};
void pack_activation_tiles(const Q8Activations& a, ActivationTiles& out);

// y[i * ldy + r] = the dot of W's row r with row i of x, for r in [r0, r1)
// and every row i: the same bits as quant_product(t, Avx512Vnni) gives.
// Needs quant_kernel_runs(Avx512Vnni).
using QuantGemm = void (*)(const QuantRows& w, int64_t r0, int64_t r1, const ActivationTiles& a, float* y,
                           int64_t ldy);
QuantGemm quant_gemm(QuantType t);

// matmul_q calls that took the tiled path (tests: which ran).
uint64_t quant_gemm_calls();
void count_quant_gemm_call();

}  // namespace rlx::cpu
