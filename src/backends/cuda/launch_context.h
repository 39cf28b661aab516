// Where and for whom a thunk launches: the arena base, the stream, and the
// thunk's label for error messages. Host-only; see launch.cuh for launching.
#pragma once
#include <cuda_runtime.h>

#include <cstdint>

namespace rlx::cuda {

struct LaunchContext {
  uint8_t* arena = nullptr;
  cudaStream_t stream = nullptr;
  const char* label = "";
};

}  // namespace rlx::cuda
