// Block quantization on the host, defined once for the loaders (quantizing
// a float model at load), the CPU matmul_q kernel and the tests. Layout:
// rlx/quant.h. Rounding follows llama.cpp's reference quantizers, so a
// weight quantized here has the bytes llama.cpp's `quantize` would give:
//  - Q8_0: d = amax / 127, q = round(x / d) (half away from zero).
//  - Q4_0: m = the element of largest magnitude (the first, on ties), with
//    its sign; d = m / -8, q = min(15, trunc(x / d + 8.5)) - 8.
//  - Q4_1: m = the block's minimum, d = (max - m) / 15,
//    q = min(15, trunc((x - m) / d + 0.5)).
//  - FP8 (no llama.cpp format): d = amax / 448, q = e4m3(x / d) rounded to
//    nearest even (rlx/fp8.h), dividing by d as stored in f16 so that the
//    codes fit the scale a kernel multiplies by (saturating where that
//    rounding makes x / d pass 448).
// All divide by the f32 d and store d rounded to f16; an all-zero block
// has d = 0 and every q 0.
#pragma once
#include <cstdint>

#include "rlx/quant.h"
#include "thunks/params.h"

namespace rlx {

// One row of k elements (k a multiple of kQuantBlock): quant_block_bytes(t)
// * k / 32 bytes of quants and k / 32 * quant_scales_per_block(t) f16 scales.
void quantize_row(QuantType t, const float* x, int64_t k, uint8_t* quants, uint16_t* scales);
void dequantize_row(QuantType t, const uint8_t* quants, const uint16_t* scales, int64_t k, float* y);

// The plain product a matmul_q of many rows runs once W is dequantized into
// p.dequantized: x [m, k] . W [n, k]^T + bias, on every backend.
MatMulParams dequantized_product(const MatMulQParams& p);

}  // namespace rlx
