// Error checks for CUDA runtime and cuBLASLt calls: every failure becomes an
// rlx::Error that names what was being done.
#pragma once
#include <cublasLt.h>
#include <cuda_runtime.h>

#include <string>

#include "rlx/error.h"

namespace rlx::cuda {

inline void check(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) throw Error("CUDA error in " + what + ": " + cudaGetErrorString(e));
}

inline void check(cublasStatus_t s, const std::string& what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw Error("cuBLASLt error in " + what + ": status " + std::to_string(int(s)));
}

}  // namespace rlx::cuda
