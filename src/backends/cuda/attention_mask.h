// The kernels around a cuDNN attention call. Their buffers belong to the
// thunk (allocated at initialize), so they are given as device addresses
// beside the arena offsets.
#pragma once
#include <cstdint>

#include "thunks/params.h"

namespace rlx::cuda {

struct MaskBiasParams {
  uint64_t mask;          // arena offset of the i32 [batch, skv] padding mask
  uint64_t bias_addr;     // device address of the [batch, skv] bias (dtype)
  uint64_t dead_addr;     // device address of i32 [batch]: 1 when every key is masked
  uint64_t out;           // arena offset of the [batch, sq, heads * head_dim] output
  int64_t batch, sq, skv, row;  // row = heads * head_dim
  DType dtype;
};

}  // namespace rlx::cuda

#include "backends/cuda/launch_context.h"

namespace rlx::cuda {
void run_mask_bias(const MaskBiasParams& p, const LaunchContext& ctx);
void run_zero_dead_rows(const MaskBiasParams& p, const LaunchContext& ctx);
}  // namespace rlx::cuda
