// The CUDA thunk of matmul_q: up to kMatMulQVectorRows rows the quantized
// matrix-vector kernel (gemv_quant.h); larger products dequantize W into the
// node's scratch output and run a MatMulPlan (cuBLASLt, timed at
// initialize) over it.
#pragma once
#include <memory>
#include <string>

#include "backends/cuda/device_thunk.h"
#include "thunks/params.h"

namespace rlx::cuda {

std::unique_ptr<DeviceThunk> make_matmul_q_thunk(const MatMulQParams& p, const DeviceResources& r,
                                                 const std::string& label);

// matmul_q thunks made so far per path, for tests that assert which one ran.
struct MatMulQPathCounts {
  int gemv = 0, dequantize = 0;
};
MatMulQPathCounts matmul_q_path_counts();

}  // namespace rlx::cuda
