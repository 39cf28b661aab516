#include "backends/cuda/l2_prefetch.h"

#include <cuda_runtime.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

#include "backends/cuda/launch.cuh"

namespace rlx::cuda {

namespace {
std::atomic<int64_t> g_launches{0};
}  // namespace

uint64_t l2_prefetch_budget() {
  if (const char* e = std::getenv("RLX_L2_PREFETCH_MB")) return uint64_t(std::strtoull(e, nullptr, 10)) << 20;
  if (!clusters_available()) return 0;  // the bulk prefetch is sm_90's
  int device = 0, bytes = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&bytes, cudaDevAttrL2CacheSize, device), "L2 cache size");
  return uint64_t(bytes) / 2;
}

L2Prefetch share_l2_prefetch(const L2Prefetch& plan, uint64_t blocks) {
  L2Prefetch f{};
  const uint64_t total = plan.total(), budget = l2_prefetch_budget();
  const char* stream = std::getenv("RLX_L2_STREAM_WEIGHTS");
  f.stream_weights = stream && std::strcmp(stream, "1") == 0;
  if (total == 0 || budget == 0 || blocks == 0) return f;
  for (int r = 0; r < L2Prefetch::kRanges; ++r) {
    // The front of the range, its share of the budget, in 16-byte units.
    uint64_t keep = budget >= total ? plan.bytes[r] : (plan.bytes[r] / 16 * budget / total) * 16;
    if (keep / blocks >= (uint64_t(1) << 30)) keep = blocks << 30;  // a slice's size is a u32
    if (keep == 0) continue;
    f.offset[r] = plan.offset[r];
    f.bytes[r] = keep;
    f.per_block[r] = ((keep + blocks - 1) / blocks + 15) / 16 * 16;
  }
  // RLX_L2_PREFETCH_TAIL=n: only the last n blocks issue (the drain); RLX_L2_STREAM_WEIGHTS=1:
  // the product's own weights evict first.
  const char* tail = std::getenv("RLX_L2_PREFETCH_TAIL");
  const uint64_t last = tail ? std::strtoull(tail, nullptr, 10) : 0;
  if (last > 0 && last < blocks) {
    f.first_block = uint32_t(blocks - last);
    for (int r = 0; r < L2Prefetch::kRanges; ++r)
      if (f.bytes[r]) f.per_block[r] = ((f.bytes[r] + last - 1) / last + 15) / 16 * 16;
  }
  if (f.total() > 0) g_launches.fetch_add(1);
  return f;
}

int64_t l2_prefetch_launches() { return g_launches.load(); }

}  // namespace rlx::cuda
