// The all_reduce thunk on the GPU (all_reduce.cc).
#pragma once
#include <memory>

#include "backends/cuda/device_thunk.h"
#include "thunks/params.h"

namespace rlx::cuda {

std::unique_ptr<DeviceThunk> make_all_reduce_thunk(const AllReduceParams& p, const DeviceResources& r);

}  // namespace rlx::cuda
