// How the blocks of one chain launch (matvec_chain.h) order its ops: after
// its part of an op a block arrives on that op's counter; before reading
// what the op wrote, a block waits until every block of the launch has
// arrived. Counters only grow: each launch takes a ticket on entry and
// waits for its own multiple of the grid, so a replayed graph needs no
// clearing node. A wait over 10 s reports and traps: never a hang.
#pragma once
#include <cstdint>
#include <cstdio>

namespace rlx::cuda::chain_sync {

// A chain launch's parameters: its ops (P: a product's params), each with
// its tile count and variant bits, and the counters.
template <class P, int MaxOps>
struct ChainLaunch {
  struct Op {
    P p;
    int64_t tiles;
    uint8_t variant;
  };
  Op op[MaxOps];
  int32_t ops;
  unsigned long long* counters;
  uint32_t backoff_ns;  // between polls of a wait (RLX_MATVEC_CHAIN_BACKOFF_NS)
};

constexpr uint64_t kSpinLimitNs = 10ull * 1000 * 1000 * 1000;

__device__ __forceinline__ uint64_t global_ns() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

// Out of line: the message's stack stays out of the tiles' registers.
static __device__ __noinline__ void report_stuck(int op, unsigned long long seen, unsigned long long target) {
  printf("rlx matvec chain: block %d waited over 10 s for op %d (%llu of %llu arrivals)\n", int(blockIdx.x), op, seen,
         target);
  __trap();
}

// The arrivals every op's counter reaches in this launch. Launches of one
// chain never overlap (a whole decode step lies between them), so each
// takes gridDim.x tickets in turn. Every thread of the block calls it.
__device__ __forceinline__ unsigned long long launch_target(unsigned long long* ticket) {
  __shared__ unsigned long long target_shared;
  if (threadIdx.x == 0) target_shared = (atomicAdd(ticket, 1ull) / gridDim.x + 1) * gridDim.x;
  __syncthreads();
  return target_shared;
}

// After this block's part of an op: its stores, then one arrival.
__device__ __forceinline__ void arrive(unsigned long long* counter) {
  __syncthreads();
  if (threadIdx.x == 0) {
    __threadfence();
    atomicAdd(counter, 1ull);
  }
}

// Until every block of this launch has arrived after the op before;
// backoff_ns > 0 sleeps that long between polls (fewer loads on the
// counter's line while the last blocks arrive).
__device__ __forceinline__ void wait_for(const unsigned long long* counter, unsigned long long target, int op,
                                         unsigned backoff_ns) {
  if (threadIdx.x == 0) {
    const uint64_t start = global_ns();
    unsigned long long seen;
    for (;;) {
      asm volatile("ld.acquire.gpu.global.u64 %0, [%1];" : "=l"(seen) : "l"(counter) : "memory");
      if (seen >= target) break;
      if (global_ns() - start > kSpinLimitNs) report_stuck(op, seen, target);
      if (backoff_ns) __nanosleep(backoff_ns);
    }
    __threadfence();
  }
  __syncthreads();
}

}  // namespace rlx::cuda::chain_sync
