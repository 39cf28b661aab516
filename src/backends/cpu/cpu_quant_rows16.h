// matmul_q's weights interleaved 16 rows at a time (as llama.cpp repacks
// Q4_0 and Q8_0 for its AVX-512 kernels), so that one 512-bit vector holds
// 4 bytes of each of 16 weight rows: a VPDPBUSD against 4 activation bytes
// broadcast to every lane gives 16 outputs' partial sums, and a block's f32
// work (scale, add) is done once per 16 outputs instead of once per output.
// In the row layout (rlx/quant.h) that f32 work cost as much as the integer
// products.
//
// Layout of rows [16g, 16g + 16) (the rows past the last multiple of 16
// keep the row layout), in the same bytes the rows held:
//   quants: for each block b, quant_block_bytes / 4 vectors of 64 bytes;
//           lane l (4 bytes) of vector v = row 16g + l's block-b bytes
//           [4v, 4v + 4). Q8_0's bytes are stored as q + 128 (the top bit
//           flipped: VPDPBUSD's unsigned operand).
//   scales: for each block b, the 16 rows' d, then (Q4_1) their 16 m.
// Weights are interleaved in place in the arena on a product's first run on
// AVX512-VNNI (WeightPacks::quant_rows16) and put back before anything
// else reads them (WeightPacks::quant_plain); gather_q reads either layout.
//
// Each output is a sum over its row's blocks in order, one f32 lane per
// row, of the block's term (cpu_quant_dot.h's formulas, written here as
// d * (dx * S - 8 sx), d * (dx * S) + m sx and d * (dx * S)), the same
// operations for any number of rows of x: a row's result does not depend
// on how many rows of x the product has (a decode step gives a recompute's
// bits). They differ from the row layout's kernels only in the f32 order.
#pragma once
#include <cstdint>

#include "backends/cpu/cpu_quant_dot.h"

namespace rlx::cpu {

// Rows of W held interleaved: all but the last n % 16.
constexpr int64_t rows16_rows(int64_t n) { return n / 16 * 16; }

// Rows [0, rows16_rows(n)) of an [n, k] weight from the row layout to the
// interleaved one, and back; in place.
void pack_rows16(QuantType t, uint8_t* quants, uint16_t* scales, int64_t n, int64_t k);
void unpack_rows16(QuantType t, uint8_t* quants, uint16_t* scales, int64_t n, int64_t k);

// Row `row`'s block b in the row layout (its quant_block_bytes bytes and
// quant_scales_per_block scales), read from an interleaved weight of k columns.
void rows16_block(QuantType t, const uint8_t* quants, const uint16_t* scales, int64_t k, int64_t row, int64_t b,
                  uint8_t* q, uint16_t* s);

// y[i * ldy + r] = the dot of W's row r with row i of a, for the rows r of
// the 16-row groups [g0, g1) and every row i of a; W interleaved (w's
// row_bytes and row_scales as in the row layout). Needs
// quant_kernel_runs(Avx512Vnni).
void product_rows16(QuantType t, const QuantRows& w, int64_t g0, int64_t g1, const Q8Activations& a, float* y,
                    int64_t ldy);

// Products run on interleaved weights so far, and those of them with at
// least kQuantGemmRows rows of x (a prompt or a batch; tests: which path ran).
uint64_t rows16_calls();
uint64_t rows16_many_row_calls();
void count_rows16_call(int64_t m);

}  // namespace rlx::cpu
