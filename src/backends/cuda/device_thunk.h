// A thunk made ready for the device: initialize happens in make_device_thunk
// (at prepare), execute only enqueues work on the given stream. The same
// execute runs per op and under stream capture, so a recorded graph is the
// per-op path by construction.
#pragma once
#include <cublasLt.h>

#include <memory>
#include <utility>
#include <vector>

#include "backends/cuda/launch_context.h"
#include "backends/cuda/matvec_chain.h"
#include "thunks/thunk.h"

namespace rlx::cuda {

class DeviceThunk {
 public:
  virtual ~DeviceThunk() = default;
  virtual void execute(const LaunchContext& ctx) const = 0;
  // A one-row matrix-vector product a chain may run in its place
  // (matvec_chain.h); empty for everything else.
  virtual ChainableProduct chainable_product() const { return {}; }
};

// What initialize may use: the arena (fixed for the executable's life), the
// cuBLASLt handle and one matmul workspace shared by the thunks of a stream.
struct MaskBiasShare;  // attention_cudnn.h: one mask bias per mask, shared by the layers
class NcclCollective;  // nccl_collective.h

struct DeviceResources {
  uint8_t* arena = nullptr;
  cublasLtHandle_t lt = nullptr;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  bool allow_tf32 = false;  // f32 matmuls on TF32 tensor cores
  std::shared_ptr<MaskBiasShare> mask_biases;  // per executable
  const NcclCollective* collective = nullptr;  // the tensor-parallel group (null: one rank)
  int rank = 0;
};

std::unique_ptr<DeviceThunk> make_device_thunk(const Thunk& t, const DeviceResources& r);

}  // namespace rlx::cuda
