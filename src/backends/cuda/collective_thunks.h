// The tensor-parallel thunks on the GPU (collective_thunks.cc): all_reduce
// and all_gather.
#pragma once
#include <memory>

#include "backends/cuda/device_thunk.h"
#include "thunks/params.h"

namespace rlx::cuda {

std::unique_ptr<DeviceThunk> make_all_reduce_thunk(const AllReduceParams& p, const DeviceResources& r);
std::unique_ptr<DeviceThunk> make_all_gather_thunk(const AllGatherParams& p, const DeviceResources& r);

}  // namespace rlx::cuda
