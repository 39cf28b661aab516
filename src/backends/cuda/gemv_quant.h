// Kernels of matmul_q (block-quantized weights, rlx/quant.h): the
// matrix-vector product that dequantizes in registers, for few rows, and
// the dequantization of a whole weight into scratch, for larger products
// (matmul_quant.h runs a cuBLASLt product over it).
#pragma once
#include <cstdint>

#include "backends/cuda/launch_context.h"
#include "thunks/params.h"

namespace rlx::cuda {

// Rows of x up to kMatMulQVectorRows, quants rows 16-byte aligned.
bool gemv_quant_eligible(const MatMulQParams& p, const uint8_t* arena);
void run_gemv_quant(const MatMulQParams& p, const LaunchContext& ctx);
// p.dequantized = dequant(W) in p.dtype.
void run_dequantize(const MatMulQParams& p, const LaunchContext& ctx);

}  // namespace rlx::cuda
