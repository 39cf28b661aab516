// KV-cache write: rows [batch, n_new, row] land in the cache [batch, max_ctx,
// row] at row pos[b] + i, pos read from the arena so a recorded graph replays
// with a new position. A row whose position falls outside the cache is
// skipped, never written out of bounds. Bytes are copied: any dtype.
#include "backends/cuda/cuda_registry.h"
#include "backends/cuda/device_types.cuh"
#include "backends/cuda/dispatch.h"
#include "backends/cuda/launch.cuh"

namespace rlx::cuda {
namespace {

// One thread per 4-byte word (a row of 4k bytes) or per 2-byte word.
template <class W>
__global__ void kv_write_kernel(const KvWriteParams p, uint8_t* arena) {
  pdl_entry();
  const int32_t* pos = at<const int32_t>(arena, p.pos);
  const int64_t words = p.row * (p.dtype == DType::F32 ? 4 : 2) / int64_t(sizeof(W));
  const int64_t total = p.batch * p.n_new * words;
  const W* rows = at<const W>(arena, p.rows);
  W* cache = at<W>(arena, p.cache);
  for (int64_t t = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; t < total; t += int64_t(gridDim.x) * blockDim.x) {
    const int64_t w = t % words, bi = t / words, b = bi / p.n_new, i = bi % p.n_new;
    const int64_t at_row = int64_t(pos[b]) + i;
    if (at_row < 0 || at_row >= p.max_ctx) continue;
    cache[(b * p.max_ctx + at_row) * words + w] = rows[bi * words + w];
  }
}

void run_kv_write(const KvWriteParams& p, const LaunchContext& ctx) {
  const int64_t row_bytes = p.row * int64_t(dtype_size(p.dtype));
  if (row_bytes % 4 == 0)
    launch(kv_write_kernel<uint32_t>, grid_for(p.batch * p.n_new * (row_bytes / 4), 256), 256, 0, ctx, p);
  else
    launch(kv_write_kernel<uint16_t>, grid_for(p.batch * p.n_new * (row_bytes / 2), 256), 256, 0, ctx, p);
}

}  // namespace

void register_cuda_kv_write(CudaRegistry& r) {
  for (DType dt : kFloatDTypes) r.add<KvWriteParams>(dt, run_kv_write);
}

}  // namespace rlx::cuda
