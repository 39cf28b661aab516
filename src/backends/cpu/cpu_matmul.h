// The CPU matrix product as one call over its params, for kernels that end
// in a plain product (matmul_q over its dequantized weight).
#pragma once
#include "backends/cpu/cpu_registry.h"

namespace rlx::cpu {

void run_matmul(const MatMulParams& p, CpuContext& ctx);

}  // namespace rlx::cpu
