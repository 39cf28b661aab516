// A kernel that only waits: queued ahead of a per-thunk timing pass so the
// device starts the thunks after the host has queued them all, and the
// events between them measure the kernels rather than host launch gaps.
#include <cuda_runtime.h>

#include <cstdint>

#include "backends/cuda/cuda_check.h"
#include "backends/cuda/kernels.h"

namespace rlx::cuda {
namespace {

__global__ void spin_kernel(uint64_t ns) {
  uint64_t t0;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  for (;;) {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    if (t - t0 >= ns) break;
    __nanosleep(1000);
  }
}

}  // namespace

void enqueue_gpu_delay(cudaStream_t stream, uint64_t ns) {
  spin_kernel<<<1, 1, 0, stream>>>(ns);
  check(cudaGetLastError(), "trace delay kernel");
}

}  // namespace rlx::cuda
