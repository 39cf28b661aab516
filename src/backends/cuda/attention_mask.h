// The kernel before a cuDNN attention call. Its bias buffer belongs to the
// thunk (allocated at initialize), so it is given as a device address beside
// the mask's arena offset.
#pragma once
#include <cstdint>

#include "thunks/params.h"

namespace rlx::cuda {

struct MaskBiasParams {
  uint64_t mask;          // arena offset of the i32 [batch, skv] padding mask
  uint64_t bias_addr;     // device address of the [batch, skv] bias (dtype)
  int64_t batch, skv;
  DType dtype;
};

}  // namespace rlx::cuda

#include "backends/cuda/launch_context.h"

namespace rlx::cuda {
void run_mask_bias(const MaskBiasParams& p, const LaunchContext& ctx);
}  // namespace rlx::cuda
